"""Every bound on reading an upload, in one place.

The readers, the bounded decoders (``codecs``) and the archive unpacker take their limits
from here and nowhere else; docs/participants.md lists them for participants (and
``test/test_limits.py`` checks that the list and this module agree). Each bound is on work or
memory that a file could otherwise make the grader spend *before* its own checks: what a
header declares is checked against these before anything is decoded, and every decoder is
given a budget of output and of work.

A label volume of the challenges is at most a few GB; chunks, strips and pages are MBs.
"""

# --- every upload
MAX_DEPTH = 64  # folder levels below the submission's root
MAX_ENTRIES = 1_000_000  # files and folders in one upload folder (an archive we unpack: its phase's own limit)
MAX_NAME_BYTES = 255  # one file or folder name (the Linux limit)

# --- archives (their total size, entries and ratio are phase options: `archive` in phase.yaml)
TAR_MAX_EXTENDED_HEADER = 1 << 20  # one GNU long name or link, or PAX header, of a tar
ARCHIVE_MAX_STREAMS = 1 << 20  # gzip members or bz2 streams around a tar (bgzip and pbzip2 write many)

# --- JSON (zarr metadata, Grand-Challenge's predictions.json)
MAX_JSON_BYTES = 1 << 20  # one metadata file (.zarray, .zattrs, zarr.json)
MAX_JOB_LIST_BYTES = 256 << 20  # predictions.json: tens of thousands of jobs
MAX_JSON_DEPTH = 32  # nesting of arrays and objects; real metadata needs 4
MAX_JSON_ELEMENTS = 2_000_000  # values, arrays and objects in one document (~40 per job)

# --- decoding (codecs): every compressed chunk, strip, tile or archive
MAX_STREAMS = 16  # concatenated compressed streams (gzip members, bz2 or xz streams) in one piece
LZMA_MEMORY = 128 << 20  # xz/lzma decoder memory, its dictionary included (xz -9 needs 65 MiB)
DECODE_STEP = 1 << 20  # compressed bytes handed to a decoder at a time (bounds every copy of what follows)
PACKBITS_OVERHEAD = 2  # a PackBits strip may hold at most twice its decoded size (+ 64 bytes)

# --- zarr
ZARR_MAX_DIMENSIONS = 32  # axes of one array
ZARR_MAX_EXTENT = 1 << 40  # voxels along one axis
ZARR_MAX_VOXELS = 1 << 50  # voxels of a whole array (shape only: callers check what they load)
ZARR_MAX_CHUNK_BYTES = 512 << 20  # one decoded chunk (an inner chunk of a shard)
ZARR_MAX_GRID_CHUNKS = 1 << 32  # chunk (or shard) coordinates of one array
ZARR_MAX_SHARD_CHUNKS = 1 << 16  # inner chunks of one shard (a 1 MiB index)
ZARR_MAX_INNER_CHUNKS = 1 << 16  # inner chunks of a sharded array over all its shards (each is decoded on its own)
PADDING_SLACK = 64 << 20  # a chunk grid (zarr, HDF5) may cover at most 2^ndim x the array's bytes + this
ZARR_MAX_STORED_ENTRIES = MAX_ENTRIES  # files and folders listed below one array
ZARR_MAX_CODECS = 16  # codecs (filters) in one pipeline
MAX_IN_FLIGHT_BYTES = 1 << 30  # decoded + encoded bytes of the chunks decoded at once

# --- HDF5
HDF5_MAX_KEY_DEPTH = 32  # groups in a dataset key
HDF5_MAX_OBJECTS = 100_000  # objects looked at while searching for the only dataset
HDF5_MAX_CHUNKS = 1 << 20  # stored chunks of one dataset (its index is held in memory)
HDF5_MAX_CHUNK_BYTES = 256 << 20  # decoded bytes of one chunk
HDF5_MAX_FILTER_OUTPUT = 256 << 20  # worst-case output of one chunk decoded by h5py's LZF filter
HDF5_MAX_ATTRIBUTE_BYTES = 64 << 10  # one attribute that is read (`description`)

# --- TIFF
TIFF_MAX_PAGES = 65536  # IFDs in the main chain
TIFF_MAX_TAGS = 1 << 22  # IFD entries over all pages (4096 per IFD, as tifffile allows)
TIFF_MAX_TAGS_PER_PAGE = 4096  # IFD entries of one page
TIFF_MAX_SEGMENTS = 1 << 20  # strips and tiles over all pages
TIFF_MAX_SEGMENT_BYTES = 256 << 20  # decoded bytes of one compressed strip or tile
TIFF_MAX_PAGE_BYTES = 2 << 30  # one page is decoded whole (slab readers read page by page)
TIFF_MAX_DESCRIPTION_BYTES = 1 << 20  # the image description (tifffile and ImageJ metadata)
TIFF_MAX_DIMENSIONS = 32  # axes a shape description may declare

# --- MetaImage, NRRD, NIfTI, PNG (decoded by SimpleITK after these checks)
DEFLATE_MAX_RATIO = 1032  # the most deflate (zlib, gzip) can expand its input
SIZE_SLACK = 1 << 16  # bytes of headers and framing allowed for in the size bounds
MAX_COMPRESSED_SKIP = 1 << 20  # bytes a gzip-encoded NRRD may skip (ITK skips them one by one)
NIFTI_MAX_VOX_OFFSET = 352 + (1 << 16)  # bytes before the pixels of a .nii.gz; header extensions are refused

# --- any array, whatever the caller's own limit
MAX_VOXELS = 1 << 50  # keeps offsets and byte counts in int64
