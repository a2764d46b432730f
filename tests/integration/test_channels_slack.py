"""The Slack channel (issue 38 item 3): signed Events API requests to the channel's endpoint, Web API calls
to a scripted Slack server on 127.0.0.1. Forged, stale and unsigned requests are refused before anything
is read; a user not allowed is never answered; the full path runs inbound → run → approval (buttons,
answered by an interactivity request) → outbound in the message's thread."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx

from agent_core.adapters.channels import ChannelHub, ChatAddress
from agent_core.adapters.channels.slack import SlackChannel, escape, signature, verify
from agent_core.testing import open_runtime
from tests.fixtures.chat_platforms import FakeSlack, signed_headers, until
from tests.fixtures.env import SoongEnv
from tests.integration.channel_support import ChannelAsker, running_hub, scripted_model, user_texts

TOKEN = "xoxb-slack-test-token-0123456789"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def event(user: str, text: str, ts: str, *, event_id: str, channel: str = "C1", **extra: Any) -> bytes:
    body = {
        "type": "event_callback",
        "event_id": event_id,
        "event": {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, **extra},
    }
    return json.dumps(body).encode()


async def post(client: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await client.post(url, content=body, headers=headers)


async def test_full_path_and_refused_requests(soong_env: SoongEnv) -> None:
    model = scripted_model()
    asker = ChannelAsker()
    with FakeSlack(TOKEN) as fake:
        async with open_runtime(
            model, project_dir=soong_env.project, home_dir=soong_env.home, permission_callback=asker
        ) as runtime:
            channel = SlackChannel(
                "sl", TOKEN, SECRET, allowed_users={"U1"}, base_url=fake.base_url, listen_port=0
            )
            hub = asker.hub = ChannelHub(runtime, [channel])
            async with running_hub(hub), httpx.AsyncClient(timeout=10) as client:
                await until(lambda: channel.listening.is_set(), what="the events endpoint")
                url = f"http://127.0.0.1:{channel.port}/slack/events"

                challenge = json.dumps({"type": "url_verification", "challenge": "abc123"}).encode()
                answer = await post(client, url, challenge, signed_headers(SECRET, challenge))
                assert answer.status_code == 200 and answer.json() == {"challenge": "abc123"}

                body = event("U1", "please write hello.txt", "1700.000100", event_id="Ev1")
                forged = await post(client, url, body, signed_headers("not-the-secret", body))
                stale = await post(client, url, body, signed_headers(SECRET, body, at=time.time() - 600))
                unsigned = await post(client, url, body, {"Content-Type": "application/json"})
                tampered_headers = signed_headers(SECRET, body)
                tampered = await post(client, url, body.replace(b"hello", b"HELLO"), tampered_headers)
                assert [r.status_code for r in (forged, stale, unsigned, tampered)] == [401] * 4
                assert channel.filtered.bad_signature == 4

                stranger = event("U9", "please write hello.txt", "1700.000050", event_id="Ev0")
                assert (
                    await post(client, url, stranger, signed_headers(SECRET, stranger))
                ).status_code == 200
                await until(lambda: channel.filtered.not_allowed == 1, what="the stranger to be dropped")
                assert model.requests == [] and fake.sent("chat.postMessage") == []

                assert (await post(client, url, body, signed_headers(SECRET, body))).status_code == 200
                retry = await post(client, url, body, signed_headers(SECRET, body))  # Slack's retry
                assert retry.status_code == 200
                question = await until(
                    lambda: [m for m in fake.sent("chat.postMessage") if "blocks" in m], what="the approval"
                )
                assert question[0]["thread_ts"] == "1700.000100" and question[0]["channel"] == "C1"
                assert "code.write_file" in question[0]["text"]
                buttons = question[0]["blocks"][1]["elements"]
                assert [b["text"]["text"] for b in buttons] == ["Allow once", "Allow for session", "Deny"]
                assert fake.sent("reactions.add") == [
                    {"channel": "C1", "timestamp": "1700.000100", "name": "hourglass_flowing_sand"}
                ]

                def press(user: str, value: str) -> bytes:
                    payload = {
                        "type": "block_actions",
                        "user": {"id": user},
                        "channel": {"id": "C1"},
                        "container": {"message_ts": "1700000001.000000"},
                        "message": {"ts": "1700000001.000000", "thread_ts": "1700.000100"},
                        "actions": [{"action_id": "soong_choice_0", "value": value}],
                    }
                    return urlencode({"payload": json.dumps(payload)}).encode()

                form = "application/x-www-form-urlencoded"
                forged_press = press("U1", buttons[0]["value"])
                refused = await post(
                    client, url, forged_press, signed_headers("nope", forged_press, content_type=form)
                )
                assert refused.status_code == 401
                by_stranger = press("U9", buttons[0]["value"])
                await post(client, url, by_stranger, signed_headers(SECRET, by_stranger, content_type=form))
                await until(
                    lambda: channel.filtered.not_allowed == 2, what="the stranger's press to be ignored"
                )
                assert not (soong_env.project / "hello.txt").exists()

                allow = press("U1", buttons[0]["value"])
                assert (
                    await post(client, url, allow, signed_headers(SECRET, allow, content_type=form))
                ).status_code == 200
                final = await until(
                    lambda: [m for m in fake.sent("chat.postMessage") if m["text"].startswith("Wrote")],
                    what="the final answer",
                )
                # mrkdwn escaped: the model's text cannot ping the channel
                assert final[0]["text"] == "Wrote hello.txt &lt;!channel&gt; &amp; co"
                assert final[0]["thread_ts"] == "1700.000100"
                assert (soong_env.project / "hello.txt").read_text() == "hi\n"
                update = await until(lambda: fake.sent("chat.update"), what="the answered question")
                assert update[0]["blocks"] == [] and update[0]["text"].endswith("→ allowed once by U1")
                await until(lambda: fake.sent("reactions.remove"), what="the typing state to clear")

                # the retried event was taken once; the session is the thread's
                assert len(model.requests) == 2
                assert sum("please write" in t for t in user_texts(model)[:1]) == 1
                session_id = hub.session_for("sl", ChatAddress("C1", "1700.000100"))
                assert session_id is not None and asker.requests[0].session_id == session_id

                # a reply in the thread continues that session; a new top-level message starts another
                reply = event("U1", "ping", "1700.000200", event_id="Ev2", thread_ts="1700.000100")
                await post(client, url, reply, signed_headers(SECRET, reply))
                top = event("U1", "<@UBOT> ping", "1700.000300", event_id="Ev3")
                await post(client, url, top, signed_headers(SECRET, top))
                await until(
                    lambda: len([m for m in fake.sent("chat.postMessage") if m["text"] == "pong"]) == 2,
                    what="two pongs",
                )
                assert hub.session_for("sl", ChatAddress("C1", "1700.000100")) == session_id
                other = hub.session_for("sl", ChatAddress("C1", "1700.000300"))
                assert other is not None and other != session_id
                assert "<@UBOT>" not in user_texts(model)[-1]


def test_signature_rules() -> None:
    body = b'{"type":"event_callback"}'
    now = 1_700_000_000
    good = {"x-slack-request-timestamp": str(now), "x-slack-signature": signature(SECRET, str(now), body)}
    assert verify(SECRET, good, body, now + 299) is None
    assert verify(SECRET, good, body, now + 301) == "stale timestamp"
    assert verify(SECRET, good, body, now - 301) == "stale timestamp"
    assert verify(SECRET, good, body + b" ", now) == "bad signature"
    assert verify("other", good, body, now) == "bad signature"
    assert verify(SECRET, {"x-slack-signature": good["x-slack-signature"]}, body, now) == "unsigned request"
    assert escape("<@U1> & <!here>") == "&lt;@U1&gt; &amp; &lt;!here&gt;"
