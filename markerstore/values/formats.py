"""How text values read, as Spark's CSV and JSON reader options say (``dateFormat``,
``timestampFormat``, ``timestampNTZFormat``, ``nanValue``, ``positiveInf``, ``negativeInf``,
``locale``): one value a conversion takes (:func:`markerstore.values.cast.cast`)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from markerstore.values import locales
from markerstore.values.patterns import DatetimePattern, compile_pattern


@dataclass(frozen=True)
class ValueFormats:
    """How text values read (Spark's CSV/JSON options): datetime patterns (None: the
    default ISO 8601 text); for floating point columns, the tokens of NaN and the
    infinities besides the IEEE ones."""

    date: str | None = None
    timestamp: str | None = None
    timestamp_ntz: str | None = None
    nan_value: str = "NaN"
    positive_inf: str = "Inf"
    negative_inf: str = "-Inf"
    # Spark's locale: how a DECIMAL's text is written (en-US: "80,000.65" is 80000.65;
    # de-DE: "80.000,65"; markerstore.values.numbers) and whose names a pattern reads
    locale: str = locales.DEFAULT

    def pattern_for(self, target: pa.DataType) -> DatetimePattern | None:
        if pa.types.is_date32(target) and self.date:
            return compile_pattern(self.date, "dateFormat", self.locale)
        if pa.types.is_timestamp(target):
            if target.tz is None and self.timestamp_ntz:
                return compile_pattern(self.timestamp_ntz, "timestampNTZFormat", self.locale)
            if target.tz is not None and self.timestamp:
                return compile_pattern(self.timestamp, "timestampFormat", self.locale)
        return None

    def reads(self, target: pa.DataType) -> bool:
        """Whether text for `target` reads otherwise than by Arrow's cast."""
        return (self.pattern_for(target) is not None or pa.types.is_decimal(target)
                or pa.types.is_timestamp(target)
                or (pa.types.is_floating(target) and self.float_tokens() is not None))

    def float_tokens(self) -> dict[str, str] | None:
        """Text that a floating point column reads as NaN or an infinity beyond what Arrow
        reads (None: only Arrow's)."""
        tokens = {self.nan_value: "NaN", self.positive_inf: "inf",
                  self.negative_inf: "-inf"}
        extra = {k: v for k, v in tokens.items()
                 if k and k not in ("NaN", "Inf", "-Inf")}
        return extra or None
