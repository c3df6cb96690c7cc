"""HTML tables for notebooks (`_repr_html_` of result objects): markerstore's one renderer,
:mod:`markerstore.notebook`, under the name errortable's modules import."""

from __future__ import annotations

from markerstore.notebook import table_html

__all__ = ["table_html"]
