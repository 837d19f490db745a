"""Segmentation-challenge grader: scores a submission against a phase's ground truth.

The package is layered so that each step can be read on its own (docs/architecture.md):

- ``contract``: the types every layer speaks (Task, Plan, Outcome, Result, Suite);
- ``archive`` and ``readers``: unpack uploads safely and load arrays with their geometry;
- ``metrics``: pure functions on arrays (overlaps, matching, Hausdorff, VoI, ...);
- ``runner``: scores a plan's tasks in isolated worker processes within the memory budget;
- ``platforms``: where the submission, the ground truth and the output folder are
  (local command line, Grand-Challenge, CodaBench);
- ``suites``: one package per challenge, composing the primitives to reproduce one reference
  evaluator exactly, registered by name;
- ``grading``: the one pipeline every grading command goes through;
- ``report``: sanitises, validates and atomically writes ``metrics.json``.
"""

__version__ = "0.1.0"
