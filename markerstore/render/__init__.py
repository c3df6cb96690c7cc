"""Renderers shared by both CLIs, the notebooks and the report: text for a terminal
(:mod:`.text`), HTML (:mod:`.html`), charts as inline SVG (:mod:`.charts`, :mod:`.figures`)
and the report page (:mod:`.page`). They render plain data and import nothing of the
project above them, so every layer may use them."""
