"""The public phase (``python -m evaluation publish``) of every bundled phase and every
conformance phase holds no ground truth: only ``phase.yaml`` (``public: true``), the CellMap
manifest, zarr metadata whose attributes say nothing but the geometry, and headers (shape, data
type, geometry) no larger than their JSON; it is byte for byte the same when every voxel of
the ground truth is replaced by another value; grading against it is refused (exit 1, the
organizer's cause in the log) while ``check`` accepts it, and the phase's scoring submission
would be scored (exit 0).
"""

import json
import shutil

import numpy as np
import pytest
import yaml
from helpers.preflight import check_args, grade_args, in_process, publish
from helpers.public_phases import BUILDERS, scramble

from evaluation import public
from evaluation.suites.cellmap.inputs import GEOMETRY_ATTRIBUTES, METADATA_FILES, PUBLIC_KEYS, read_manifest

FAST = (
    "ground-truth",
    "examples/multiclass",
    "examples/annotators",
    "container/grand-challenge-jobs",
    "cellmap/k_mask",
    "fisbe/a_perfect",
    "segmentation/instances",
    "tomo_fuelcell",
    "detection",
)
PHASES = [pytest.param(name, marks=() if name in FAST else pytest.mark.slow) for name in BUILDERS]


def files(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_metadata_only(phase, public_dir) -> None:
    config = yaml.safe_load((phase / "phase.yaml").read_text())
    found = files(public_dir)
    assert yaml.safe_load(found.pop("phase.yaml")) == {**config, "public": True}
    for relative, content in found.items():
        name = relative.rsplit("/", 1)[-1]
        if name.endswith(".csv"):  # the CellMap manifest: its rows, as grading reads them
            assert read_manifest(public_dir / relative) == read_manifest(phase / relative), relative
        elif name in METADATA_FILES:
            document, original = json.loads(content), json.loads((phase / relative).read_bytes())
            attributes = document if name == ".zattrs" else document.get("attributes", {})
            assert set(attributes) <= set(GEOMETRY_ATTRIBUTES), relative
            if name != ".zattrs":  # the reader's keys, as the organizer wrote them, and no other
                assert set(document) - {"attributes"} <= set(PUBLIC_KEYS[name]), relative
                assert all(document[key] == original[key] for key in document if key != "attributes"), relative
        else:
            assert len(content) <= public.MAX_HEADER_BYTES and public.is_header(public_dir / relative), relative
            header = public.read_header(public_dir / relative)
            assert header.shape is None or len(header.shape) in (2, 3, 4), relative


@pytest.mark.parametrize("name", PHASES)
def test_the_public_phase_holds_no_ground_truth(name, tmp_path):
    phase, _ = BUILDERS[name](tmp_path / "built")
    public_dir = publish(phase, tmp_path / "public")
    assert_metadata_only(phase, public_dir)
    other = shutil.copytree(phase, tmp_path / "other" / "phase")
    assert scramble(other) > 0
    assert files(publish(other, tmp_path / "other-public")) == files(public_dir)


@pytest.mark.parametrize("name", PHASES)
def test_a_scoring_submission_would_be_scored_and_the_public_phase_cannot_be_graded(name, tmp_path, capsys):
    phase, submission = BUILDERS[name](tmp_path / "built")
    public_dir = publish(phase, tmp_path / "public")
    checked = in_process(check_args(submission, public_dir), capsys)
    assert checked.code == 0 and checked.last_line.startswith("Would be scored: "), checked
    graded = in_process(grade_args(submission, public_dir, tmp_path / "out"), capsys)
    assert graded.code == 1 and "public phase" in graded.output and not (tmp_path / "out").exists(), graded


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_consolidated_metadata_and_extra_keys_of_a_cellmap_truth_are_not_published(tmp_path, zarr_format, capsys):
    """A truth zarr with consolidated metadata holds every array's attributes (here a voxel
    count per label) at its root, and an organizer may add keys of their own: the public phase
    is written from the keys planning reads, so neither reaches it, and it still checks."""
    import zarr

    phase, submission = BUILDERS["cellmap/k_mask"](tmp_path / "built")
    truth = phase / "truth.zarr"
    source = zarr.open_group(str(truth), mode="r")
    rewritten = zarr.open_group(str(tmp_path / "rewritten.zarr"), mode="w", zarr_format=zarr_format)
    for crop_name, crop in source.groups():
        group = rewritten.create_group(crop_name)
        for label, array in crop.arrays():
            copy = group.create_array(label, data=array[...], chunks=array.chunks)
            copy.attrs.update({**array.attrs, "voxels_per_label": {"1": 4242}})
    zarr.consolidate_metadata(str(tmp_path / "rewritten.zarr"))
    shutil.rmtree(truth)
    shutil.move(tmp_path / "rewritten.zarr", truth)
    root = truth / ("zarr.json" if zarr_format == 3 else ".zgroup")
    root.write_text(json.dumps({**json.loads(root.read_text()), "organizer_note": "lesion volumes 4242"}))
    assert b"4242" in (truth / ("zarr.json" if zarr_format == 3 else ".zmetadata")).read_bytes()
    published = files(publish(phase, tmp_path / "public"))
    assert_metadata_only(phase, tmp_path / "public")
    assert not [name for name, content in published.items() if b"4242" in content or name.endswith(".zmetadata")]
    checked = in_process(check_args(submission, tmp_path / "public"), capsys)
    assert checked.code == 0 and checked.last_line.startswith("Would be scored: "), checked


def test_the_number_of_ground_truth_instances_is_not_published(tmp_path):
    """A FISBe ground truth is a stack of one channel per neuron: the public phase holds the
    image's shape, not the stack's."""
    import zarr

    published = []
    for neurons in (2, 5):
        phase = tmp_path / f"phase{neurons}"
        group = zarr.open_group(str(phase / "s0.zarr"), mode="w", zarr_format=2)
        stack = np.zeros((neurons, 8, 16, 16), np.uint8)
        stack[:, 4, 4:12, 8] = 1
        group.create_array("volumes/gt_instances", data=stack, chunks=(1, 8, 16, 16))
        (phase / "phase.yaml").write_text("suite: fisbe\n")
        published.append(files(publish(phase, tmp_path / f"public{neurons}")))
    assert published[0] == published[1]
    assert json.loads(published[0]["s0.zarr"])["shape"] == [8, 16, 16]


def test_publish_refuses_a_public_phase_and_a_folder_inside_the_phase(tmp_path):
    from evaluation import phase as phases
    from evaluation.errors import PhaseError
    from evaluation.preflight import publish_phase

    phase, _ = BUILDERS["ground-truth"](tmp_path / "built")
    public_dir = publish(phase, tmp_path / "public")
    with pytest.raises(PhaseError, match="already public"):
        publish_phase(phases.load(public_dir), tmp_path / "again")
    with pytest.raises(PhaseError, match="outside the phase folder"):
        publish_phase(phases.load(phase), phase / "public")
    with pytest.raises(PhaseError, match="not empty"):
        publish_phase(phases.load(phase), public_dir)


def test_a_header_stands_for_a_file_without_its_voxels(tmp_path):
    from helpers.hostile import itk_image, truth_map

    from evaluation.errors import PhaseError
    from evaluation.readers import images

    path = itk_image(truth_map(1), tmp_path / "full" / "case_1.mha", spacing=(1.0, 1.0, 2.0), origin=(3.0, 4.0, 5.0))
    header = public.Header.of(images.read(path))
    public.write_header(tmp_path / "public" / "case_1.mha", header)
    assert public.read_header(tmp_path / "public" / "case_1.mha") == header
    assert header.shape == (6, 8, 8) and header.spacing == (2.0, 1.0, 1.0) and header.origin == (5.0, 4.0, 3.0)
    volume = header.volume()
    assert volume.array.shape == (6, 8, 8) and volume.array.strides == (0, 0, 0)  # no memory behind it
    images.check_geometry(images.read(path), volume, "case_1.mha")  # the prediction on the truth's grid passes
    assert public.voxel_count(tmp_path / "public" / "case_1.mha", "truth") == public.voxel_count(path, "truth") == 384
    assert not public.is_header(path)
    with pytest.raises(PhaseError, match="not a header"):
        public.read_header(path)


def test_a_memory_estimate_reads_the_header_and_falls_back_to_the_file_size(tmp_path):
    """The plans of the segmentation, detection and multiclass suites size a case by its truth's
    header; a header that cannot be read gives the file size (the worker reports the file)."""
    import numpy as np

    from evaluation.public import estimated_voxels

    np.save(tmp_path / "a.npy", np.zeros((3, 4, 5), np.uint8))
    (tmp_path / "b.nii.gz").write_bytes(b"x" * 100)
    assert estimated_voxels(tmp_path / "a.npy") == 60
    assert estimated_voxels(tmp_path / "b.nii.gz") == 100
    assert estimated_voxels(tmp_path / "missing.nii.gz") == 1 << 20
