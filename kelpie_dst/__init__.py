"""kelpie_dst: deterministic simulation testing for trio programs."""
