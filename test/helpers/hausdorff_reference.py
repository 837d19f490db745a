"""The CellMap reference's per-instance Hausdorff distance, as the executable specification of
``metrics.hausdorff``: for each id, the union of its two boxes padded by ``ceil(cap / vs) + 2``
and two full Euclidean distance transforms, as the reference does it
(janelia-cellmap/cellmap-segmentation-challenge ``utils/eval_utils/distance.py``). Orders of
magnitude slower than the grader's path; tests and ``bench/cellmap_crop.py`` compare the fast
path against it."""

import numpy as np

from evaluation.metrics.hausdorff.boxes import label_boxes, union


def capped_hausdorff_padded_roi(a: np.ndarray, b: np.ndarray, ids, voxel_size, cap: float) -> np.ndarray:
    """The reference's own algorithm on two label images (ROI = union box padded by
    ceil(cap / vs) + 2, two full transforms per id)."""
    from scipy import ndimage

    vs = np.asarray(voxel_size, dtype=np.float64)[-a.ndim :]
    pad = np.ceil(cap / vs).astype(int) + 2
    boxes_a, boxes_b = label_boxes(a), label_boxes(b)
    out = np.empty(len(ids), dtype=np.float32)
    for i, g in enumerate(int(x) for x in ids):
        box = union([boxes_a[g], boxes_b.get(g, boxes_a[g])])
        roi = tuple(slice(max(0, s.start - p), min(n, s.stop + p)) for s, p, n in zip(box, pad, a.shape))
        in_a, in_b = a[roi] == g, b[roi] == g
        if not in_b.any():
            out[i] = cap
            continue
        fwd = ndimage.distance_transform_edt(~in_b, sampling=vs)[in_a].max()
        bwd = ndimage.distance_transform_edt(~in_a, sampling=vs)[in_b].max()
        out[i] = min(max(fwd, bwd), cap)
    return out
