"""One-to-one instance matching by min-cost flow (CellMap ``match_instances``).

The graph is built exactly as the reference builds it, arc for arc and in the same order,
because OR-Tools breaks ties between equally good matchings by arc order: source -> GT i
(cost 0), GT i -> sink (cost S+1, "unmatched"), GT g -> prediction p for every overlapping
pair in ascending (g, p) order (cost ``int((1 - iou32) * S)``), prediction j -> sink (cost 0).
Every matched pair is worth at least 1 more than leaving its GT unmatched, so there is no IoU
threshold: any overlap can match. Arcs are added in bulk from numpy arrays.
"""

import numpy as np
import numpy.typing as npt
from ortools.graph.python import min_cost_flow  # type: ignore[import-untyped]  # OR-Tools has no type information


class MatchingFailed(RuntimeError):
    """The solver did not reach an optimal flow."""


def pair_iou32(inter: np.ndarray, size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """IoU of overlapping pairs, computed in float64 and stored as float32 like the reference."""
    iou: npt.NDArray[np.float32] = (inter / (size_a + size_b - inter)).astype(np.float32)
    return iou


def min_cost_flow_matching(
    n_gt: int, n_pred: int, gt: np.ndarray, pred: np.ndarray, iou32: np.ndarray, cost_scale: int
) -> dict[int, int]:
    """Map prediction id -> GT id. ``gt``/``pred`` are 1-based ids of the overlapping pairs,
    sorted ascending by (gt, pred); ``iou32`` their float32 IoUs (all > 0)."""
    source, gt0, pred0 = 0, 1, 1 + n_gt
    sink = pred0 + n_pred
    gt_nodes = np.arange(gt0, gt0 + n_gt, dtype=np.int64)
    pred_nodes = np.arange(pred0, pred0 + n_pred, dtype=np.int64)
    pair_costs = ((1.0 - iou32.astype(np.float64)) * cost_scale).astype(np.int64)  # truncation, as int()
    tails = np.concatenate([np.full(n_gt, source), gt_nodes, gt0 + gt.astype(np.int64) - 1, pred_nodes])
    heads = np.concatenate([gt_nodes, np.full(n_gt, sink), pred0 + pred.astype(np.int64) - 1, np.full(n_pred, sink)])
    costs = np.concatenate([np.zeros(n_gt), np.full(n_gt, cost_scale + 1), pair_costs, np.zeros(n_pred)])

    flow = min_cost_flow.SimpleMinCostFlow()
    flow.add_arcs_with_capacity_and_unit_cost(
        tails.astype(np.int32), heads.astype(np.int32), np.ones(tails.size, np.int64), costs.astype(np.int64)
    )
    flow.set_node_supply(source, int(n_gt))
    flow.set_node_supply(sink, -int(n_gt))
    status = flow.solve()
    if status != flow.OPTIMAL:
        raise MatchingFailed(f"min-cost flow status {status}")

    first_pair_arc = 2 * n_gt
    pair_arcs = np.arange(first_pair_arc, first_pair_arc + gt.size)
    used = flow.flows(pair_arcs) == 1
    return {int(p): int(g) for g, p in zip(gt[used], pred[used])}
