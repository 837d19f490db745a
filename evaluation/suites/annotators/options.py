"""The annotators phase's options: the tool's settings, with its defaults.

The settings are those of the tool's evaluation menu (MMV-Lab/string_vessel_project@c90f9ec,
``core/evaluation.py``: ``create_evaluation_menu`` passes ``eval_class``, the dilation
(``n_pixels``, ``kernel_shape``) and ``staple_threshold`` to ``evaluation_metrics``); its UI
defaults are the phase schema's defaults, which are read here and nowhere else.
"""

from dataclasses import dataclass

from evaluation.phase import Phase, option_schemas


@dataclass(frozen=True)
class Options:
    annotations: str
    annotators: tuple[str, ...] | None  # folder names, in column order; None: all, sorted
    eval_class: int
    dilation_radius: int | None  # None: no dilation
    dilation_footprint: str
    staple_threshold: float
    surface_distance: str  # all_pixels | boundary | boundary_pooled
    missing_prediction: str  # empty | skip (the tool's behaviour)
    max_models: int

    @classmethod
    def from_phase(cls, phase: Phase) -> "Options":
        annotators = phase.option("annotators")
        dilation = phase.option("dilation")
        settings = {**dilation_defaults(phase.suite), **(dilation or {})}
        return cls(
            annotations=phase.option("annotations"),
            annotators=tuple(annotators) if annotators is not None else None,
            eval_class=phase.option("eval_class"),
            dilation_radius=None if dilation is False else settings["radius"],
            dilation_footprint=settings["footprint"],
            staple_threshold=phase.option("staple_threshold"),
            surface_distance=phase.option("surface_distance"),
            missing_prediction=phase.option("missing_prediction"),
            max_models=phase.option("max_models"),
        )


def dilation_defaults(suite: str) -> dict:
    """``radius`` and ``footprint`` when ``dilation`` is absent or leaves them out: the
    schema's defaults of the option's object form (the tool's UI: disk of radius 3)."""
    (form,) = [spec for spec in option_schemas(suite)["dilation"]["oneOf"] if spec.get("type") == "object"]
    return {name: spec["default"] for name, spec in form["properties"].items()}
