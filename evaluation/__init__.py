"""Segmentation-challenge grader: scores a submission against a phase's ground truth.

The package is layered so that each step can be read on its own:

- ``platforms``: where the submission, the ground truth and the output folder are
  (local command line, Grand-Challenge, CodaBench);
- ``archive`` and ``readers``: unpack uploads safely and load arrays with their geometry;
- ``metrics``: pure functions on arrays (overlaps, matching, Hausdorff, VoI, ...);
- ``suites``: one module per challenge, composing the primitives to reproduce one reference
  evaluator exactly, registered by name;
- ``runner``: scores the cases of a suite in isolated worker processes;
- ``report``: sanitises, validates and atomically writes ``metrics.json``.
"""

__version__ = "0.1.0"
