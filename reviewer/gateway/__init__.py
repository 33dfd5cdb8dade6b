"""The review gateway: an OpenAI-compatible API under /v1/ through which an application's
generations run on Caesura's engine under its domain's pause policies, and reach the
application as its domain's reviewers let them (docs/gateway.md).

``schemas`` reads requests, ``errors`` answers refusals in OpenAI's shape, ``auth`` and
``limits`` admit a call, ``progress`` follows a session's events, ``delivery`` decides what
text may leave now, ``answers`` and ``streams`` put it in the SDK's types, ``views`` ties
them together. Every change to a session goes through reviewer.lifecycle.gateway."""
