"""Self-contained HTML pages of a schedule (``collc show``) and of ``compare``/``tune``/``bench report``
(``--html``), docs/show.md.  ``collc.show.build`` makes the pages; this package imports nothing, so that
``collc --help`` stays light."""
