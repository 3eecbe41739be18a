"""The shared corpora, as located by ``tests._shared`` (``COLLC_CORPUS`` or ``../shared``)."""

from tests._shared import shared

__all__ = ["shared"]
