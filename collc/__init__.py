"""collc: a compiler from topologies and collective algorithms to verified MSCCL schedules.

``__version__`` is the version of an uninstalled checkout; an installed collc reports its
package metadata (``collc --version``), which pyproject.toml sets: the two are kept equal
(tests/test_cli_names.py).
"""

__version__ = "0.1.0"
