"""zeroforge: train game-playing AIs by self-play and tree search, AlphaGo-style.

One installed package with four parts, each a folder at the top of the repository
(``pyproject.toml`` maps them in, see docs/architecture.md, "Layout"):
``zeroforge.shared`` (games, search, nets, transport, players: what every side imports),
``zeroforge.actors`` (self-play workers, inference servers, the rating service),
``zeroforge.learner`` (replay window, training, checkpoints) and ``zeroforge.deploy``
(the command line, the local and Ray runtimes, dashboards, engines). Importing this
package imports none of them.
"""

from __future__ import annotations

from importlib import metadata

try:
    __version__: str = metadata.version("zeroforge")
    """The installed distribution's version (``pyproject.toml`` is its one source)."""
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
