"""The tomo_fuelcell phase options, read once into one typed object.

Every default is the phase schema's (``schemas/phase.schema.json``): the challenge's time
steps A, B and C, its four regions and its scored slices 240-840 of 1100 (the challenge
website; tomochallenge/tomochallenge_utils@fab535f ``fuelcell_utils.prepare_submission`` cuts
the same window).
"""

from dataclasses import dataclass

from evaluation import phase as phases
from evaluation.errors import PhaseError
from evaluation.phase import Phase
from evaluation.readers.tomo_volumes import Window

NAME = "tomo_fuelcell"


@dataclass(frozen=True)
class Options:
    time_steps: tuple[str, ...]
    truth: str  # file template, '{step}' replaced by the time step
    region_labels: str  # file template
    regions: dict  # region name -> {labels: [...]} or {mask: template}, in scoring order
    window: Window  # the 'slices' option
    empty_region: str  # 'nan' (0/0) or 'one'

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        slices = {**phases.defaults(NAME)["slices"], **phase.options.get("slices", {})}  # keys left out: the default's
        window = Window(**slices)
        if not 0 <= window.start < window.stop <= window.total:
            raise PhaseError("slices: expected 0 <= start < stop <= total")
        return cls(
            tuple(phase.option("time_steps")),
            phase.option("truth"),
            phase.option("region_labels"),
            phase.option("regions"),
            window,
            phase.option("empty_region"),
        )
