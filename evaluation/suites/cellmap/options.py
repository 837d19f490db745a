"""CellMap's phase options: the reference version, where the truth lies, which labels are
instances, and the reference's tunables.

Every default is written once, in ``schemas/phase.schema.json``, and read through
``Phase.option``. The reference reads its tunables from environment variables
(``utils/eval_utils/config.py``, ``EvaluationConfig.from_env``); here they are phase options, so a
phase says what it was scored with.
"""

import math
from dataclasses import dataclass, fields

from evaluation import phase as phases
from evaluation.phase import Phase

SUITE = "cellmap"
REPOSITORY = "janelia-cellmap/cellmap-segmentation-challenge"

# The reference's global list (``config.py`` ``INSTANCE_CLASSES``), membership by exact name.
# It always decides the resampling order (``scoring.py`` ``match_crop_space`` hands it to
# ``MatchedCrop``), and it is what ``instance_classes`` means when a phase does not set it.
INSTANCE_CLASSES = ("nuc", "vim", "ves", "endo", "lyso", "ld", "perox", "mito", "np", "mt", "cell", "instance")


@dataclass(frozen=True)
class Limits:
    """The reference's tunables (``utils/eval_utils/config.py`` ``EvaluationConfig`` and
    ``utils/matched_crop.py`` ``MAX_VOLUME_SIZE_RATIO``); each is a phase option."""

    final_instance_ratio_cutoff: float
    initial_instance_ratio_cutoff: float
    instance_ratio_factor: float
    max_overlap_edges: int
    mcmf_cost_scale: int
    max_volume_size_ratio: float

    @classmethod
    def from_phase(cls, phase: Phase) -> "Limits":
        return cls._read(phase.option)

    @classmethod
    def reference(cls) -> "Limits":
        """The schema's defaults, which are the reference's."""
        return cls._read(phases.defaults(SUITE).__getitem__)

    @classmethod
    def _read(cls, option) -> "Limits":
        # Each value as its field's type: the schema writes 10 where the reference has 10.0.
        return cls(**{f.name: f.type(option(f.name)) for f in fields(cls)})

    def ratio_cutoff(self, n_gt: int) -> float:
        """Largest accepted (max prediction id) / (max truth id) ratio (``config.py``
        ``ratio_cutoff``, applied by ``instance_matching.py`` ``_check_instance_ratio``)."""
        return float(
            self.final_instance_ratio_cutoff + self.initial_instance_ratio_cutoff * math.exp(-n_gt / self.instance_ratio_factor)
        )


@dataclass(frozen=True)
class Options:
    """One phase's settings. ``version`` picks the reference commit (``v2`` or ``head``);
    ``pathological_crops`` only applies to ``head``."""

    version: str
    truth: str
    manifest: str
    instance_classes: tuple[str, ...]
    pathological_crops: str
    limits: Limits

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        classes = phase.option("instance_classes")
        return cls(
            version=phase.option("version"),
            truth=phase.option("truth"),
            manifest=phase.option("manifest"),
            instance_classes=INSTANCE_CLASSES if classes is None else tuple(classes),
            pathological_crops=phase.option("pathological_crops"),
            limits=Limits.from_phase(phase),
        )
