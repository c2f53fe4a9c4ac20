"""kelpie_agent: a Letta-compatible agent server built on ports that kelpie_dst simulates.

The runtime arrives in later issues; today the package only reserves its place.
"""

__version__ = "0.1.0"
