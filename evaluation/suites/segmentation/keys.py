"""What an output key is: its name (numbers written without dots) and its kind (whether and
how it ranks, what an undefined value counts as, whether the report plots it).

Every key a phase writes has one ``Kind``: the metric table (``metrics_table``) gives the kinds
of the listed metrics' keys, the whole evaluations (``modes``) those of their references'
tables. Ranking, the nan policy ``worst``, the report's plots and the refusal of a ranking key
without a direction all read the kind; no rule looks at a key's spelling.
"""

from dataclasses import dataclass

DIAGONAL = "diagonal"  # the image diagonal: the worst a distance can be


def number_key(value) -> str:
    """A number as part of a metrics key (keys hold no dots): 95 -> '95', 0.5 -> '0p5'."""
    return value if isinstance(value, str) else f"{float(value):g}".replace(".", "p").replace("-", "m")


@dataclass(frozen=True)
class Kind:
    """``direction``: ``higher`` or ``lower`` is better, None for a key that describes rather
    than scores (a count, a size, a signed difference): it cannot be the ranking key.
    ``worst``: what an undefined value counts as under ``nan_policy: worst`` (a number,
    ``DIAGONAL``, or None: left out). ``plotted``: the report draws its box plot."""

    direction: str | None
    worst: float | str | None
    plotted: bool = True

    @property
    def rankable(self) -> bool:
        return self.direction is not None

    @property
    def higher_is_better(self) -> bool:
        return self.direction != "lower"

    def worst_value(self, diagonal: float) -> float | None:
        return diagonal if self.worst == DIAGONAL else self.worst


SCORE = Kind("higher", 0.0)  # 0 at worst: Dice, recall, NSD, PQ, ...
CORRELATION = Kind("higher", -1.0)  # -1 at worst: MCC, Cohen's kappa, Youden's index
DISTANCE = Kind("lower", DIAGONAL)  # HD, ASSD, centre distance: at worst the image diagonal
ERROR = Kind("lower", None)  # lower is better, unbounded: an absolute volume error
COUNT = Kind(None, None, plotted=False)  # voxel counts, surface sizes, signed differences
TALLY = Kind(None, None)  # a count whose spread over the cases the report shows (per size bin)
# A field of a reference's own table that does not rank (its counts, sizes and standard
# deviations): plotted, and counting as 0, its smallest value, where undefined.
FIELD = Kind(None, 0.0)
# The mean over the matched instances of a quantity that has no direction itself (a signed
# volume difference, a size): ranked higher-is-better, no worst value.
AVERAGE = Kind("higher", None)


def in_reference_table(kind: Kind) -> Kind:
    """A metric's kind inside a reference's own table (panoptica's result, the BraTS tables):
    ranked the same way, but a distance there has no worst value (the references write their
    own penalties: infinity, 373, 374) and a quantity without a direction is a ``FIELD``."""
    if not kind.rankable:
        return FIELD
    return ERROR if kind.worst == DIAGONAL else kind
