"""Tools for the people who run a leaderboard, not for the platforms: ``rescore`` (many
submissions on Dask), ``rank`` (the final ranking as challengeR computes it, and its
uncertainty), ``sensitivity`` (the ranking under every metric definition of the segmentation
suite), ``compare`` (what a re-score changed, and why), ``fingerprint`` (a phase's files hashed
once) and ``rasterize`` (tomo_foam's build-time label volumes), all as
``python -m evaluation <command>`` (``organizer.commands``)."""

COMMANDS = ("rescore", "rank", "sensitivity", "rasterize", "fingerprint", "compare")
