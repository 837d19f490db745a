"""What a metric's function reads: the measurements of one (case, class), or of one matched
instance pair.

Every function of the metric table (``metrics_table.Metric.compute``) takes one ``Measured``
and returns its keys' values. A (case, class) has its four confusion counts (from the case's
one contingency pass) and its box (both label maps cut to the class's bounding box, where
surfaces are searched); a matched pair has its two masks alone. Masks are built on first use:
a phase without a shape metric never builds them.
"""

from functools import cached_property


class Measured:
    """``options``: the phase's options (percentiles, tolerances, betas, band widths);
    ``spacing``: the distances' spacing; ``counts``: (tp, fp, fn, tn); ``box``: a
    ``surfaces.Box``; ``masks``: (truth, prediction), from the box unless given;
    ``image_shape``: the whole image's; ``values``: the keys the functions run before have
    computed (a function that ``reads`` them runs after them, ``metrics_table``)."""

    def __init__(self, options, spacing, counts=None, box=None, masks=None, image_shape=None):
        self.options, self.spacing, self.counts, self.box = options, tuple(spacing), counts, box
        self.image_shape, self.values = image_shape, {}
        if masks is not None:
            self.masks = masks

    @cached_property
    def masks(self) -> tuple:
        return self.box.masks()
