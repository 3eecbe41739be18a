"""Algorithm families, one module (or package) each, found by :mod:`collc.frontends.registry`.

Importing the package registers the topology finder's spec families (``find:``, ``recipe:``;
:mod:`collc.frontends.topology_finder`), which the topology layer cannot build on its own.
"""

from collc.frontends import topology_finder as _topology_finder  # noqa: F401
