"""The agent core: AgentActor, its state, the loop per agent type, tools, streaming, checkpoints.

An :class:`AgentActor` is one agent as a virtual actor. It keeps its state in the KV port
(key layout in ``_codec``), runs the Letta-style loop (``memgpt_agent``, ``letta_v1_agent``,
``react_agent``) against the LLM port, runs tools (memory, archival and conversation search,
sandbox, custom code, MCP), streams events, and writes a checkpoint with every step so a crash
never repeats a completed tool call. See docs/agent.md and docs/tools/.
"""

from ._actor import AgentActor as AgentActor
from ._agent_files import AgentFile as AgentFile
from ._agent_files import FileState as FileState
from ._archives import ArchiveRecord as ArchiveRecord
from ._archives import ArchiveStore as ArchiveStore
from ._boot import BOOT_ARGUMENTS as BOOT_ARGUMENTS
from ._boot import BOOT_MESSAGE as BOOT_MESSAGE
from ._boot import BOOT_THOUGHT as BOOT_THOUGHT
from ._boot import is_prompt as is_prompt
from ._builtins import BUILTINS as BUILTINS
from ._builtins import Builtin as Builtin
from ._builtins import builtin_by_name as builtin_by_name
from ._builtins import builtin_id as builtin_id
from ._builtins import default_tool_names as default_tool_names
from ._cancels import CancelTable as CancelTable
from ._cancels import cancel_keys as cancel_keys
from ._checkpoint import PendingCall as PendingCall
from ._checkpoint import SessionCheckpoint as SessionCheckpoint
from ._codec import Keys as Keys
from ._compaction import CompactionResult as CompactionResult
from ._config import ActorContextLike as ActorContextLike
from ._config import AgentEnv as AgentEnv
from ._config import LoopConfig as LoopConfig
from ._config import McpToolSource as McpToolSource
from ._conversations import UPDATABLE_CONVERSATION_FIELDS as UPDATABLE_CONVERSATION_FIELDS
from ._conversations import ConversationRecord as ConversationRecord
from ._conversations import CreateConversation as CreateConversation
from ._conversations import DeleteConversation as DeleteConversation
from ._conversations import ForkConversation as ForkConversation
from ._conversations import UpdateConversation as UpdateConversation
from ._custom_tools import CustomTool as CustomTool
from ._custom_tools import parse_tool_source as parse_tool_source
from ._documents import DocumentError as DocumentError
from ._documents import UnsupportedFileError as UnsupportedFileError
from ._errors import AgentError as AgentError
from ._errors import AgentExistsError as AgentExistsError
from ._errors import AgentNotFoundError as AgentNotFoundError
from ._errors import AgentStorageError as AgentStorageError
from ._errors import BlockLimitError as BlockLimitError
from ._errors import BlockNotFoundError as BlockNotFoundError
from ._errors import InvalidRequestError as InvalidRequestError
from ._errors import NameConflictError as NameConflictError
from ._errors import PassageNotFoundError as PassageNotFoundError
from ._errors import PendingApprovalError as PendingApprovalError
from ._errors import ResourceNotFoundError as ResourceNotFoundError
from ._errors import SessionError as SessionError
from ._errors import SummarizerError as SummarizerError
from ._errors import ToolDefinitionError as ToolDefinitionError
from ._errors import ToolNotFoundError as ToolNotFoundError
from ._folders import FileRecord as FileRecord
from ._folders import Folder as Folder
from ._folders import FolderStore as FolderStore
from ._identities import IdentityProperty as IdentityProperty
from ._identities import IdentityRecord as IdentityRecord
from ._identities import IdentityStore as IdentityStore
from ._loading import load_agent as load_agent
from ._loading import load_blocks as load_blocks
from ._loading import load_tool_specs as load_tool_specs
from ._loading import load_tools as load_tools
from ._loading import load_view as load_view
from ._messages import AgentMessage as AgentMessage
from ._messages import ApprovalDecision as ApprovalDecision
from ._messages import ApprovalRequestMessage as ApprovalRequestMessage
from ._messages import ApprovalResponseMessage as ApprovalResponseMessage
from ._messages import AssistantMessage as AssistantMessage
from ._messages import LettaStopReason as LettaStopReason
from ._messages import LettaUsage as LettaUsage
from ._messages import ReasoningMessage as ReasoningMessage
from ._messages import StreamEvent as StreamEvent
from ._messages import SystemMessage as SystemMessage
from ._messages import ToolCallInfo as ToolCallInfo
from ._messages import ToolCallMessage as ToolCallMessage
from ._messages import ToolReturnMessage as ToolReturnMessage
from ._messages import UserMessage as UserMessage
from ._messages import letta_json as letta_json
from ._messages import render_messages as render_messages
from ._models import AGENT_TYPES as AGENT_TYPES
from ._models import AgentRecord as AgentRecord
from ._models import Block as Block
from ._models import PassageRecord as PassageRecord
from ._models import ToolRule as ToolRule
from ._models import ToolSpec as ToolSpec
from ._requests import UPDATABLE_FIELDS as UPDATABLE_FIELDS
from ._requests import AgentView as AgentView
from ._requests import AttachBlock as AttachBlock
from ._requests import AttachFolder as AttachFolder
from ._requests import AttachShared as AttachShared
from ._requests import AttachTool as AttachTool
from ._requests import BlockCreate as BlockCreate
from ._requests import CloseFile as CloseFile
from ._requests import CompactMessages as CompactMessages
from ._requests import CreateAgent as CreateAgent
from ._requests import CreateSchedule as CreateSchedule
from ._requests import DeleteAgent as DeleteAgent
from ._requests import DeletePassage as DeletePassage
from ._requests import DeleteSchedule as DeleteSchedule
from ._requests import DetachBlock as DetachBlock
from ._requests import DetachFolder as DetachFolder
from ._requests import DetachShared as DetachShared
from ._requests import DetachTool as DetachTool
from ._requests import ExportSession as ExportSession
from ._requests import FireSchedule as FireSchedule
from ._requests import GetAgent as GetAgent
from ._requests import GetBlock as GetBlock
from ._requests import GetSession as GetSession
from ._requests import ImportSession as ImportSession
from ._requests import InputMessage as InputMessage
from ._requests import InsertPassage as InsertPassage
from ._requests import ListAgentFiles as ListAgentFiles
from ._requests import ListBlocks as ListBlocks
from ._requests import ListMessages as ListMessages
from ._requests import ListPassages as ListPassages
from ._requests import ListTools as ListTools
from ._requests import OpenFile as OpenFile
from ._requests import PassageHit as PassageHit
from ._requests import Recompile as Recompile
from ._requests import ResetMessages as ResetMessages
from ._requests import ResumeRun as ResumeRun
from ._requests import RunTool as RunTool
from ._requests import SearchPassages as SearchPassages
from ._requests import SendMessage as SendMessage
from ._requests import SessionSnapshot as SessionSnapshot
from ._requests import SetToolApproval as SetToolApproval
from ._requests import ToolRunResult as ToolRunResult
from ._requests import TurnResult as TurnResult
from ._requests import UpdateAgent as UpdateAgent
from ._requests import UpdateBlock as UpdateBlock
from ._retry import Reader as Reader
from ._runs import OtidRecord as OtidRecord
from ._runs import RunRecord as RunRecord
from ._schedules import ScheduledMessage as ScheduledMessage
from ._steps import FEEDBACKS as FEEDBACKS
from ._steps import STEP_STATUSES as STEP_STATUSES
from ._steps import StepRecord as StepRecord
from ._stores import BlockStore as BlockStore
from ._stores import ToolStore as ToolStore
from ._teleport import SandboxImage as SandboxImage
from ._teleport import SandboxRestoreError as SandboxRestoreError
from ._teleport import SandboxSaveError as SandboxSaveError
from ._tool_rules import TOOL_RULE_TYPES as TOOL_RULE_TYPES

__all__ = [
    "AGENT_TYPES",
    "BOOT_ARGUMENTS",
    "BOOT_MESSAGE",
    "BOOT_THOUGHT",
    "BUILTINS",
    "FEEDBACKS",
    "STEP_STATUSES",
    "TOOL_RULE_TYPES",
    "UPDATABLE_CONVERSATION_FIELDS",
    "UPDATABLE_FIELDS",
    "ActorContextLike",
    "AgentActor",
    "AgentEnv",
    "AgentError",
    "AgentExistsError",
    "AgentFile",
    "AgentMessage",
    "AgentNotFoundError",
    "AgentRecord",
    "AgentStorageError",
    "AgentView",
    "ApprovalDecision",
    "ApprovalRequestMessage",
    "ApprovalResponseMessage",
    "ArchiveRecord",
    "ArchiveStore",
    "AssistantMessage",
    "AttachBlock",
    "AttachFolder",
    "AttachShared",
    "AttachTool",
    "Block",
    "BlockCreate",
    "BlockLimitError",
    "BlockNotFoundError",
    "BlockStore",
    "Builtin",
    "CancelTable",
    "CloseFile",
    "CompactMessages",
    "CompactionResult",
    "ConversationRecord",
    "CreateAgent",
    "CreateConversation",
    "CreateSchedule",
    "CustomTool",
    "DeleteAgent",
    "DeleteConversation",
    "DeletePassage",
    "DeleteSchedule",
    "DetachBlock",
    "DetachFolder",
    "DetachShared",
    "DetachTool",
    "DocumentError",
    "ExportSession",
    "FileRecord",
    "FileState",
    "FireSchedule",
    "Folder",
    "FolderStore",
    "ForkConversation",
    "GetAgent",
    "GetBlock",
    "GetSession",
    "IdentityProperty",
    "IdentityRecord",
    "IdentityStore",
    "ImportSession",
    "InputMessage",
    "InsertPassage",
    "InvalidRequestError",
    "Keys",
    "LettaStopReason",
    "LettaUsage",
    "ListAgentFiles",
    "ListBlocks",
    "ListMessages",
    "ListPassages",
    "ListTools",
    "LoopConfig",
    "McpToolSource",
    "NameConflictError",
    "OpenFile",
    "OtidRecord",
    "PassageHit",
    "PassageNotFoundError",
    "PassageRecord",
    "PendingApprovalError",
    "PendingCall",
    "Reader",
    "ReasoningMessage",
    "Recompile",
    "ResetMessages",
    "ResourceNotFoundError",
    "ResumeRun",
    "RunRecord",
    "RunTool",
    "SandboxImage",
    "SandboxRestoreError",
    "SandboxSaveError",
    "ScheduledMessage",
    "SearchPassages",
    "SendMessage",
    "SessionCheckpoint",
    "SessionError",
    "SessionSnapshot",
    "SetToolApproval",
    "StepRecord",
    "SummarizerError",
    "SystemMessage",
    "ToolCallInfo",
    "ToolCallMessage",
    "ToolDefinitionError",
    "ToolNotFoundError",
    "ToolReturnMessage",
    "ToolRule",
    "ToolRunResult",
    "ToolSpec",
    "ToolStore",
    "TurnResult",
    "UnsupportedFileError",
    "UpdateAgent",
    "UpdateBlock",
    "UpdateConversation",
    "UserMessage",
    "builtin_by_name",
    "builtin_id",
    "cancel_keys",
    "default_tool_names",
    "is_prompt",
    "letta_json",
    "load_agent",
    "load_blocks",
    "load_tool_specs",
    "load_tools",
    "load_view",
    "parse_tool_source",
    "render_messages",
]
