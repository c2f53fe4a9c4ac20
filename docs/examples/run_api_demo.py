"""kelpie_dst.run and what it returns (docs/api.md). Run: python run_api_demo.py"""

from __future__ import annotations

import tutorial_leaks
import tutorial_wallet

import kelpie_dst

result = kelpie_dst.run(tutorial_wallet.main, seed=3)
print("ok:", result.ok, "exit_code:", result.exit_code)
print("summary:", result.summary_line())
assert result.failure is not None
print("failure.kind:", repr(result.failure.kind), "label:", result.failure.kind.label)
print("failure.message:", result.failure.message)
print("failure.virtual_time:", result.failure.virtual_time)
print("wall_seconds > 0:", result.wall_seconds > 0)
print("same seed, equal result:", kelpie_dst.run(tutorial_wallet.main, seed=3) == result)

leaky = kelpie_dst.run(tutorial_leaks.main, seed=1, epoch=0.0)
print("redirected:", leaky.redirected)
print("value:", leaky.value)
