"""A payload codec for tests: what a client without it cannot read."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine.converter import Payload, PayloadCodec


class WrapCodec(PayloadCodec):
    """Wraps each payload whole (its metadata too) under an encoding only this codec
    reads, so a payload that skipped it, or a reader without it, shows at once."""

    def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"binary/wrapped"}, data=json.dumps(p.to_json()).encode())
            for p in payloads
        ]

    def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload.from_json(json.loads(p.data)) for p in payloads]
