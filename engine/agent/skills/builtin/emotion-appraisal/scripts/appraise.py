"""emotion-appraisal: valence / arousal / label from word rules over observations (see SKILL.md)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

STATE = "emotion"
BASELINE = {"valence": 0.0, "arousal": 0.3}
RATE = 0.5
HISTORY = 10
THREAD_TAIL = 6

POSITIVE = frozenset(
    "happy glad joy joyful love loved loving great good thanks thank thankful grateful won win wins success "
    "successful praise praised friend friends friendly fun enjoy enjoyed wonderful excited celebrate celebrated "
    "proud kind kindness help helped helpful gift nice welcome welcomed congratulations hope hopeful promoted "
    "smile smiled laugh laughed beautiful delighted agree agreed".split()
)
NEGATIVE = frozenset(
    "sad unhappy angry anger hate hated bad lost lose losing fail failed failure hurt pain sick ill alone lonely "
    "fired insult insulted rude afraid scared fear worried worry anxious threat threatened danger cry cried "
    "crying fight fought argue argued blame blamed broke broken died death terrible awful ignored rejected "
    "unfair disappointed upset sorry late".split()
)
AROUSING = frozenset(
    "urgent emergency danger threat threatened fight fought shout shouted scream screamed excited panic alarm "
    "attack attacked hurry rush angry furious thrilled shocked".split()
)
CALMING = frozenset("calm relax relaxed rest rested quiet peaceful sleep slept tea slow gentle safe".split())
NEGATORS = frozenset("not no never nothing hardly without nor".split())
POSITIVE_ZH = ("开心", "高兴", "快乐", "喜欢", "感谢", "成功", "好消息", "朋友")
NEGATIVE_ZH = ("难过", "伤心", "生气", "愤怒", "害怕", "担心", "失败", "孤独", "讨厌")
AROUSING_ZH = ("紧急", "危险", "吵架", "激动")
CALMING_ZH = ("平静", "放松", "休息")

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def appraise(text: str) -> dict[str, Any]:
    """Evidence from one text: target valence and arousal, and the words that produced them."""
    words = _WORD.findall(text.lower())
    found: dict[str, list[str]] = {"positive": [], "negative": [], "arousing": [], "calming": []}
    pos = neg = 0.0
    for i, word in enumerate(words):
        negated = any(w in NEGATORS or w.endswith("n't") for w in words[max(0, i - 2):i])
        if word in POSITIVE:
            found["positive" if not negated else "negative"].append(("not " if negated else "") + word)
            pos, neg = (pos + 1, neg) if not negated else (pos, neg + 0.5)
        elif word in NEGATIVE:
            found["negative" if not negated else "positive"].append(("not " if negated else "") + word)
            pos, neg = (pos, neg + 1) if not negated else (pos + 0.5, neg)
        if word in AROUSING:
            found["arousing"].append(word)
        if word in CALMING:
            found["calming"].append(word)
    for key, lexicon in (("positive", POSITIVE_ZH), ("negative", NEGATIVE_ZH), ("arousing", AROUSING_ZH), ("calming", CALMING_ZH)):
        for term in lexicon:
            hits = text.count(term)
            found[key].extend([term] * hits)
            if key == "positive":
                pos += hits
            elif key == "negative":
                neg += hits
    valence = (pos - neg) / (pos + neg + 1)
    arousal = (BASELINE["arousal"] + 0.15 * len(found["arousing"]) + 0.05 * (pos + neg)
               + 0.05 * min(text.count("!") + text.count("！"), 4) - 0.15 * len(found["calming"]))
    return {"valence": valence, "arousal": min(1.0, max(0.0, arousal)), "evidence": found}


def label_of(valence: float, arousal: float) -> str:
    if valence >= 0.2:
        return "excited" if arousal >= 0.55 else "content"
    if valence <= -0.2:
        return "distressed" if arousal >= 0.55 else "sad"
    if arousal >= 0.6:
        return "alert"
    return "calm" if arousal <= 0.2 else "neutral"


def update(state: dict[str, Any], text: str, now: Any) -> dict[str, Any]:
    evidence = appraise(text)
    valence = state.get("valence", BASELINE["valence"])
    arousal = state.get("arousal", BASELINE["arousal"])
    valence = round(valence + RATE * (evidence["valence"] - valence), 3)
    arousal = round(arousal + RATE * (evidence["arousal"] - arousal), 3)
    label = label_of(valence, arousal)
    at = now.isoformat() if now is not None else None
    return {
        "valence": valence, "arousal": arousal, "label": label,
        "intensity": round(math.hypot(valence, arousal - BASELINE["arousal"]), 3),
        "evidence": evidence["evidence"],
        "appraisals": int(state.get("appraisals", 0)) + 1,
        "history": [*state.get("history", []), {"t": at, "label": label}][-HISTORY:],
        "updated_at": at,
    }


def _thread_tail(ctx: Any) -> str:
    """The last user messages of the thread log (earlier steps' observations and tool results)."""
    text = ctx.read_file(".runtime/logs/thread_messages.jsonl")
    if text is None:
        return ""
    messages = []
    for line in text.splitlines()[-200:]:
        if line.strip():
            record = json.loads(line)
            if record.get("role") == "user":
                messages.append(str(record.get("content", "")))
    return "\n".join(messages[-THREAD_TAIL:])


def _apply(ctx: Any, text: str) -> dict[str, Any] | str:
    if not text.strip():
        return "no observations to appraise; emotion unchanged"
    state = update(ctx.read_state(STATE), text, ctx.now)
    ctx.write_state(STATE, state)
    ctx.log(f"{state['label']} (valence {state['valence']}, arousal {state['arousal']})")
    return state


def entrypoint(argv: list[str], ctx: Any) -> dict[str, Any] | str:
    if argv[:1] == ["show"]:
        return ctx.read_state(STATE) or {**BASELINE, "label": label_of(**BASELINE), "appraisals": 0}
    words = argv[1:] if argv[:1] == ["appraise"] else argv
    text = " ".join(words) if words else ("\n".join(ctx.observations) or _thread_tail(ctx))
    return _apply(ctx, text)


def pre_step(ctx: Any) -> dict[str, Any] | str:
    return _apply(ctx, "\n".join(ctx.observations))
