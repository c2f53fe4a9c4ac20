"""SimLLM: deterministic models behind kelpie_agent's LLM port, with the ``llm.*`` faults.

* Policies decide what the model says: :class:`ScriptedPolicy` (rules, loadable from plain
  data with :func:`policy_from_dict`), :class:`AdversarialPolicy` and :class:`HelpfulPolicy`.
* Two ways to plug one in: :class:`SimLlmClient` implements the port directly;
  :func:`start_anthropic_host` serves the Anthropic Messages API on a simulated node, so the
  real SDK (``kelpie_agent.llm.AnthropicLlm``) is the code under test.

Latency is virtual (:class:`LlmTiming`). See docs/llm.md.
"""

from ._api_host import AnthropicApiHost as AnthropicApiHost
from ._api_host import start_anthropic_host as start_anthropic_host
from ._client import SimLlmClient as SimLlmClient
from ._engine import LlmObserver as LlmObserver
from ._engine import LlmTiming as LlmTiming
from ._engine import Plan as Plan
from ._engine import StreamShape as StreamShape
from ._engine import check_api_rules as check_api_rules
from ._engine import count_tokens as count_tokens
from ._faults import ALL as FAULTS
from ._faults import Failure as Failure
from ._policies import AdversarialPolicy as AdversarialPolicy
from ._policies import HelpfulPolicy as HelpfulPolicy
from ._policies import policy_from_dict as policy_from_dict
from ._scripted import Rule as Rule
from ._scripted import ScriptedPolicy as ScriptedPolicy
from ._summarizer import is_summary_request as is_summary_request
from ._summarizer import summarize as summarize
from ._turns import Call as Call
from ._turns import Policy as Policy
from ._turns import Reply as Reply
from ._turns import Turn as Turn
from ._turns import latest_turn as latest_turn

__all__ = [
    "FAULTS",
    "AdversarialPolicy",
    "AnthropicApiHost",
    "Call",
    "Failure",
    "HelpfulPolicy",
    "LlmObserver",
    "LlmTiming",
    "Plan",
    "Policy",
    "Reply",
    "Rule",
    "ScriptedPolicy",
    "SimLlmClient",
    "StreamShape",
    "Turn",
    "check_api_rules",
    "count_tokens",
    "is_summary_request",
    "latest_turn",
    "policy_from_dict",
    "start_anthropic_host",
    "summarize",
]
