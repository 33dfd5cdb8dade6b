"""The /v1/ request bodies, declared once: pydantic models that validate what an OpenAI client
sends and refuse, with a clear message, what Caesura does not do (n other than 1, tools,
images). Each endpoint's body becomes one ``Call``, the form the rest of the gateway reads.
Fields OpenAI defines that change nothing here (``metadata``, ``store``, ...) are accepted
and ignored, as OpenAI-compatible servers do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from inference.config import MIN_SCALE
from reviewer.web.arguments import MAX_INT, storable

MODEL_PREFIX = "caesura:"
MAX_STOPS = 4  # OpenAI's own limit
MAX_STOP_CHARS = 200
MAX_MESSAGES = 200

Role = Literal["system", "developer", "user", "assistant"]
TEXT_PARTS = ("text", "input_text", "output_text")


def refuse(param: str, message: str) -> PydanticCustomError:
    """A refusal that names its parameter where a check over several fields finds it (the
    error's location would be the whole body): ``errors.from_validation`` reads it."""
    return PydanticCustomError(
        "refused", message.replace("{", "{{").replace("}", "}}"), {"param": param}
    )


def unstorable(value: Any) -> str | None:
    """Where in a JSON value a string (or key) is not storable: its dotted path ("" for the
    top level), or None. Iterative: a body nested as deeply as the parser allows is fine."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        where, item = pending.pop()
        if isinstance(item, str) and not storable(item):
            return where
        if isinstance(item, dict):
            for key, inner in item.items():
                if not storable(str(key)):
                    return where
                pending.append((f"{where}.{key}" if where else str(key), inner))
        elif isinstance(item, list):
            pending.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(item))
    return None


class Lenient(BaseModel):
    # Strict: OpenAI refuses "max_tokens": true or "temperature": "0.5"; converting them would
    # generate what the application did not ask for. An integer is still a number.
    model_config = ConfigDict(extra="ignore", strict=True)


class ContentPart(Lenient):
    type: str
    text: str


def as_text_part(part: Any) -> Any:
    """An assistant's ``refusal`` part (the SDK's own type) as the text it holds."""
    refused = isinstance(part, dict) and part.get("type") == "refusal"
    if refused and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    return part


class Message(Lenient):
    role: Role
    content: str | list[ContentPart] = ""
    tool_calls: list[Any] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def text_only(cls, value: Any, info: ValidationInfo) -> Any:
        """Null is no text, which only an assistant's message may be (as OpenAI has it); a
        list holds text parts only. Checked before the forms content may take, so that a
        refusal says what is wrong with the parts."""
        if value is None:
            if info.data.get("role") != "assistant":
                raise ValueError("content must be text: only an assistant's message may have none")
            return ""
        if isinstance(value, list):  # an earlier answer's refusal, replayed: its words
            value = [as_text_part(part) for part in value]
        for part in value if isinstance(value, list) else ():
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in TEXT_PARTS or not isinstance(part.get("text"), str):
                shown = f'of type "{kind}"' if isinstance(kind, str) else "without a type"
                raise ValueError(
                    f"content parts {shown} are not supported: Caesura reviews text only"
                    " (text parts with their text; no images, audio or files)"
                )
        return value

    @field_validator("role", mode="before")
    @classmethod
    def known_role(cls, value: Any) -> Any:
        if value in ("tool", "function"):
            raise ValueError("tool and function messages are not supported: Caesura has no tools")
        return value

    @model_validator(mode="after")
    def no_tool_calls(self) -> Message:
        if self.tool_calls:
            raise ValueError("tool calls are not supported: Caesura has no tools")
        return self

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)  # as vLLM joins text parts

    def as_chat(self) -> dict[str, str]:
        # The chat template knows system, user and assistant; a developer message is a system one.
        role = "system" if self.role == "developer" else self.role
        return {"role": role, "content": self.text()}


class StreamOptions(Lenient):
    include_usage: bool = False


class Sampling(Lenient):
    """What every generating endpoint shares."""

    model: str = Field(
        min_length=1, max_length=200, description="caesura:<domain slug>, as GET /v1/models lists"
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="0 decodes greedily; absent: the domain's preset"
    )
    top_p: float | None = Field(
        default=None, ge=0, le=1, description="0 keeps only the most likely token, as OpenAI does"
    )
    seed: int | None = Field(
        default=None,
        ge=-(2**63),
        lt=2**63,
        description="Same seed, same text; random when absent (any 64-bit integer)",
    )
    user: str | None = Field(
        default=None, max_length=256, description="Your end user, kept with the generation"
    )
    stream: bool = Field(default=False, description="Server-sent events instead of one answer")
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, description="1 only: each call makes one reviewed choice")
    tools: list[Any] | None = Field(default=None, description="Refused: Caesura has no tools")
    functions: list[Any] | None = Field(default=None, description="Refused, as tools")
    tool_choice: Any = Field(default=None, description="none or auto only: no tools")
    response_format: dict[str, Any] | None = Field(
        default=None,
        description='{"type": "text"} only: the text is a reviewer\'s, not a schema\'s',
    )
    logit_bias: dict[str, Any] | None = Field(default=None, description="Refused unless empty")
    frequency_penalty: float | None = Field(default=None, description="0 only")
    presence_penalty: float | None = Field(default=None, description="0 only")
    modalities: list[str] | None = Field(default=None, description='["text"] only')
    audio: Any = Field(default=None, description="Refused: text only")
    prediction: Any = Field(default=None, description="Refused: the text is the model's")
    web_search_options: Any = Field(default=None, description="Refused: no web search")

    @model_validator(mode="after")
    def nothing_unsupported(self) -> Sampling:
        # What would change the text is refused, never ignored: the answer would not be what
        # the application asked for.
        if self.n not in (None, 1):
            raise refuse("n", f"n={self.n} is not supported: each call makes one reviewed choice")
        if self.tools or self.functions:
            raise refuse("tools", "tools and functions are not supported: Caesura has no tools")
        if self.tool_choice not in (None, "none", "auto"):
            raise refuse(
                "tool_choice", "tool_choice must be none or auto: Caesura has no tools to call"
            )
        if self.response_format and self.response_format.get("type", "text") != "text":
            raise refuse(
                "response_format",
                "response_format other than text is not supported: Caesura does not constrain"
                " the text to a format",
            )
        if self.logit_bias:
            raise refuse("logit_bias", "logit_bias is not supported")
        if self.frequency_penalty or self.presence_penalty:
            param = "frequency_penalty" if self.frequency_penalty else "presence_penalty"
            raise refuse(param, f"{param} is not supported (0 only)")
        if self.modalities not in (None, ["text"]) or self.audio is not None:
            param = "audio" if self.audio is not None else "modalities"
            raise refuse(param, f"{param} is not supported: Caesura reviews text only")
        for param in ("prediction", "web_search_options"):
            if getattr(self, param) is not None:
                raise refuse(param, f"{param} is not supported")
        if self.stream_options is not None and not self.stream:
            raise refuse("stream_options", "stream_options is only allowed when stream is true")
        return self


Stop = str | list[str] | None


def checked_stops(stop: Stop) -> None:
    try:
        stop_list(stop)
    except ValueError as exc:
        raise refuse("stop", str(exc)) from None


def stop_list(stop: Stop) -> list[str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOPS:
        raise ValueError(f"at most {MAX_STOPS} stop strings")
    if any(not s or len(s) > MAX_STOP_CHARS for s in stops):
        raise ValueError(f"each stop string must have 1 to {MAX_STOP_CHARS} characters")
    return stops


def case_text(messages: list[Message]) -> str:
    """What reviewers read as the case: the last user message, else the last message (as
    ``Call.input_text``)."""
    users = [m for m in messages if m.role == "user"]
    return (users[-1] if users else messages[-1]).text() if messages else ""


NO_CASE = "The last user message holds no text: reviewers read it as the case"


class ChatRequest(Sampling):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_INT)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_INT)
    stop: Stop = Field(default=None, description="Up to 4 strings; the text ends before one")
    logprobs: bool | None = Field(
        default=None, description="Each token's log probability, from the engine's own"
    )
    top_logprobs: int | None = Field(
        default=None, ge=0, le=20, description="Alternatives per token; needs logprobs: true"
    )

    @model_validator(mode="after")
    def checked(self) -> ChatRequest:
        checked_stops(self.stop)
        if not case_text(self.messages).strip():
            raise refuse("messages", NO_CASE)
        if self.top_logprobs and not self.logprobs:
            raise refuse("top_logprobs", "top_logprobs needs logprobs: true")
        return self


class CompletionRequest(Sampling):
    prompt: str | list[str] = Field(min_length=1)

    @field_validator("prompt", mode="before")
    @classmethod
    def one_text(cls, value: Any) -> Any:
        """One non-empty string (alone or in a list): the text Caesura's reviewers read."""
        texts = value if isinstance(value, list) else [value]
        if not all(isinstance(text, str) for text in texts):
            raise ValueError(
                "prompt must be text (a string, or a list of one string): token ids are not"
                " supported, as reviewers read the prompt as text"
            )
        if len(texts) == 1 and not texts[0]:
            raise ValueError("prompt must not be empty")
        return value

    max_tokens: int | None = Field(default=16, ge=1, le=MAX_INT)
    stop: Stop = None
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None

    @model_validator(mode="after")
    def checked(self) -> CompletionRequest:
        checked_stops(self.stop)
        if isinstance(self.prompt, list) and len(self.prompt) != 1:
            raise refuse("prompt", "prompt must be one string: each call makes one reviewed choice")
        for param, given in (("echo", self.echo), ("suffix", self.suffix)):
            if given:
                raise refuse(param, f"{param} is not supported")
        if self.best_of not in (None, 1):
            raise refuse("best_of", "best_of other than 1 is not supported")
        return self

    def text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]


class ResponseRequest(Sampling):
    input: str | list[Message] = Field(min_length=1)
    instructions: str | None = None
    background: bool = Field(
        default=False, description="Return at once; follow with GET /v1/responses/{id}"
    )
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_INT)
    text: dict[str, Any] | None = Field(
        default=None, description='{"format": {"type": "text"}} only, as response_format'
    )
    previous_response_id: str | None = Field(
        default=None, description="Refused: send the whole conversation as input"
    )
    conversation: Any = Field(default=None, description="Refused, as previous_response_id")
    prompt: Any = Field(default=None, description="Refused: no stored prompt templates")
    top_logprobs: int | None = Field(
        default=None, description="Refused here: /v1/chat/completions reports log probabilities"
    )
    include: list[str] | None = Field(
        default=None, description="Refused where it asks for log probabilities, as top_logprobs"
    )

    @field_validator("input", mode="before")
    @classmethod
    def messages_only(cls, value: Any) -> Any:
        """Text, or messages (the items a conversation holds); no tool outputs or references
        to stored items. Checked first, so that a refusal names the item's type."""
        for item in value if isinstance(value, list) else ():
            kind = item.get("type", "message") if isinstance(item, dict) else None
            if kind != "message":
                shown = f'of type "{kind}"' if isinstance(kind, str) else "that is not an object"
                raise ValueError(
                    f"input items {shown} are not supported: Caesura takes text or messages"
                    " (no tools, no references to stored items)"
                )
        return value

    @model_validator(mode="after")
    def nothing_ignored(self) -> ResponseRequest:
        """What would change the text is refused, never ignored (as Sampling's checks)."""
        fmt = (self.text or {}).get("format") or {}
        if not isinstance(fmt, dict) or fmt.get("type", "text") != "text":
            raise refuse(
                "text.format",
                "text.format other than text is not supported: Caesura does not constrain the"
                " text to a format",
            )
        for param in ("previous_response_id", "conversation"):
            if getattr(self, param) is not None:
                raise refuse(
                    param,
                    f"{param} is not supported: Caesura keeps no conversation state between"
                    " calls; send the whole conversation as input",
                )
        if self.prompt is not None:
            raise refuse(
                "prompt",
                "prompt (a stored prompt template) is not supported: send the instructions and"
                " the input themselves",
            )
        if any("logprobs" in item for item in self.include or []):
            raise refuse(
                "include",
                "log probabilities are not supported on /v1/responses: /v1/chat/completions"
                " reports them",
            )
        if self.top_logprobs:
            raise refuse(
                "top_logprobs",
                "top_logprobs is not supported on /v1/responses: /v1/chat/completions reports"
                " log probabilities",
            )
        if not case_text(self.messages()).strip():
            raise refuse("input", NO_CASE)
        return self

    def messages(self) -> list[Message]:
        if isinstance(self.input, str):
            given = [Message(role="user", content=self.input)]
        else:
            given = list(self.input)
        if self.instructions:
            given = [Message(role="system", content=self.instructions), *given]
        return given


# --- the normalised call -----------------------------------------------------------------


def engine_seed(seed: int | None) -> int | None:
    """The engine keys its draws by a seed in [0, 2**63); OpenAI's clients send any signed
    64-bit integer: a negative one is taken modulo 2**63, so that each still names one text."""
    return None if seed is None else seed % 2**63


@dataclass(frozen=True)
class Call:
    """One generating call, whichever endpoint it came through."""

    endpoint: str  # "chat.completion" | "text_completion" | "response"
    model: str
    messages: list[dict[str, str]] | None = None  # chat and responses
    prompt: str | None = None  # completions: raw text, no chat template
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    background: bool = False
    instructions: str | None = None  # responses: kept to be echoed, as OpenAI does
    limit_name: str = ""  # how the call named its token limit; "" where it left it to the domain

    @property
    def domain_slug(self) -> str:
        return self.model.removeprefix(MODEL_PREFIX)

    def input_text(self) -> str:
        """What a reviewer reads as the case: the last user message (in a conversation
        without one, as OpenAI accepts, the last message of any role), or the prompt."""
        if self.messages is None:
            return self.prompt or ""
        users = [m["content"] for m in self.messages if m["role"] == "user"]
        return users[-1] if users else self.messages[-1]["content"]

    def decoding(self) -> dict[str, Any]:
        """The sampling parameters the call sets; the domain's defaults fill the rest."""
        asked = {
            "temperature": self.temperature,
            # The engine's nucleus keeps at least one token: its smallest top_p is 0's meaning.
            "top_p": None if self.top_p is None else max(self.top_p, MIN_SCALE),
            "seed": engine_seed(self.seed),
            "max_new_tokens": self.max_tokens,
        }
        values = {k: v for k, v in asked.items() if v is not None}
        if self.top_logprobs > 5:  # the engine reports 5 alternatives unless asked for more
            values["top_alternatives"] = self.top_logprobs
        return values

    def record(self) -> dict[str, Any]:
        """What the session keeps of the call (its ``gateway`` field)."""
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "stop": self.stop,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "user": self.user,
            "background": self.background,
            "instructions": self.instructions,
            "limit_name": self.limit_name,
        }


def include_usage(body: Sampling) -> bool:
    return bool(body.stream_options and body.stream_options.include_usage)


def chat_call(body: ChatRequest) -> Call:
    return Call(
        endpoint="chat.completion",
        model=body.model,
        messages=[m.as_chat() for m in body.messages],
        max_tokens=body.max_completion_tokens or body.max_tokens,
        limit_name=(
            "max_completion_tokens"
            if body.max_completion_tokens
            else "max_tokens"
            if body.max_tokens
            else ""
        ),
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stop=stop_list(body.stop),
        logprobs=bool(body.logprobs),
        top_logprobs=body.top_logprobs or 0,
        stream=body.stream,
        include_usage=include_usage(body),
        user=body.user,
    )


def completion_call(body: CompletionRequest) -> Call:
    return Call(
        endpoint="text_completion",
        model=body.model,
        prompt=body.text(),
        max_tokens=body.max_tokens,
        limit_name="max_tokens" if body.max_tokens else "",
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stop=stop_list(body.stop),
        logprobs=body.logprobs is not None,
        top_logprobs=body.logprobs or 0,
        stream=body.stream,
        include_usage=include_usage(body),
        user=body.user,
    )


def response_call(body: ResponseRequest) -> Call:
    return Call(
        endpoint="response",
        model=body.model,
        messages=[m.as_chat() for m in body.messages()],
        max_tokens=body.max_output_tokens,
        limit_name="max_output_tokens" if body.max_output_tokens else "",
        temperature=body.temperature,
        top_p=body.top_p,
        seed=body.seed,
        stream=body.stream,
        user=body.user,
        background=body.background,
        instructions=body.instructions,
    )
