"""``topobind tune``: the user's own program under candidate placements, the best chosen
with confidence (:mod:`.stats`, :mod:`.session`), recorded per program and node type
(:mod:`.records`) and reused by ``--layout auto`` (:mod:`.auto`)."""
