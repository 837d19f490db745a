"""The tomo_foam phase options, read once into one typed object.

Every default is the phase schema's (``schemas/phase.schema.json``): the challenge's one
phantom ``foam_phantom_1`` with its void list, the void-class radii of
tomochallenge/tomochallenge_utils@fab535f ``foam_phantom_utils.compute_scores`` (0.1 and
0.025) and its harmonic mean over all five scores.
"""

from dataclasses import dataclass

from evaluation.phase import Phase

NAME = "tomo_foam"


@dataclass(frozen=True)
class Options:
    phantoms: dict  # phantom name -> {spheres, labels, grid, expanding} as written in phase.yaml
    large_min_r: float
    medium_min_r: float
    harm_mean_of: str  # 'all' (the reference) or 'defined'

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        return cls(
            phase.option("phantoms"), phase.option("large_min_r"), phase.option("medium_min_r"), phase.option("harm_mean_of")
        )

    @property
    def defined_only(self) -> bool:
        """The harmonic mean leaves undefined (NaN) scores out."""
        return self.harm_mean_of == "defined"
