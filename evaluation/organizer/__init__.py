"""Tools for the people who run a leaderboard, not for the platforms: ``rescore`` (many
submissions on Dask), ``rank`` (ranking uncertainty) and ``rasterize`` (tomo_foam's build-time
label volumes), all as ``python -m evaluation <command>`` (``organizer.commands``)."""

COMMANDS = ("rescore", "rank", "rasterize", "fingerprint", "compare")
