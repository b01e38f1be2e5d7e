"""daily-planning: a deterministic plan for the day from the profile and the clock (see SKILL.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

STATE = "plan_state"
DAY_END = 24 * 60

# (activity, minutes) laid out forward from waking; (activity, "HH:MM") runs until that time;
# (None, None) is the leisure filler; items after it are laid out backward from bedtime.
AGENDAS: dict[str, list[tuple[str | None, Any]]] = {
    "worker": [("morning routine and breakfast", 60), ("commute to work", 30), ("work", "12:00"), ("lunch", 60),
               ("work", "17:30"), ("commute home", 30), ("dinner", 60), (None, None), ("wind down for sleep", 30)],
    "student": [("morning routine and breakfast", 60), ("go to school", 30), ("classes", "12:00"), ("lunch", 60),
                ("classes", "16:00"), ("go home", 30), ("homework and study", 120), ("dinner", 60), (None, None),
                ("wind down for sleep", 30)],
    "retired": [("morning routine and breakfast", 60), ("morning walk", 60), ("household chores and errands", "12:00"),
                ("lunch", 60), ("rest", 60), ("time with friends or family", 120), ("dinner", 60), (None, None),
                ("wind down for sleep", 30)],
    "home": [("morning routine and breakfast", 60), ("household chores", 120), ("errands and shopping", "12:00"),
             ("lunch", 60), ("look for work or personal projects", 180), ("dinner", 60), (None, None),
             ("wind down for sleep", 30)],
    "weekend": [("morning routine and breakfast", 60), ("household chores", 90), ("errands and shopping", "12:00"),
                ("lunch", 60), ("time with friends or family", 180), ("dinner", 60), (None, None),
                ("wind down for sleep", 30)],
}


def _minutes(text: str) -> int:
    hours, minutes = str(text).split(":")
    value = int(hours) * 60 + int(minutes)
    if not 0 <= value <= DAY_END:
        raise ValueError(f"time {text!r} is not between 00:00 and 24:00")
    return value


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def role_of(profile: Any) -> str:
    occupation = str(profile.get("occupation") or "").strip().lower()
    age = profile.get("age")
    age = age if isinstance(age, int | float) else None
    if "retired" in occupation or (not occupation and age is not None and age >= 65):
        return "retired"
    if "student" in occupation or (age is not None and age < 18):
        return "student"
    if occupation in ("", "unemployed", "none", "homemaker", "housewife", "househusband"):
        return "home"
    return "worker"


def _leisure(profile: Any, day: datetime) -> str:
    hobbies = profile.get("hobbies") or profile.get("interests") or []
    if isinstance(hobbies, str):
        hobbies = [h.strip() for h in hobbies.split(",")]
    hobbies = [str(h) for h in hobbies if str(h).strip()]
    return f"leisure: {hobbies[day.toordinal() % len(hobbies)]}" if hobbies else "free time"


def make_plan(profile: Any, now: datetime) -> dict[str, Any]:
    role = role_of(profile)
    weekend = now.weekday() >= 5 and role != "retired"
    wake = _minutes(profile.get("wake_time") or ("06:30" if role == "retired" else "07:00")) + (60 if weekend else 0)
    sleep = _minutes(profile.get("sleep_time") or ("22:00" if role == "retired" else "23:00"))
    if sleep <= wake:  # a bedtime after midnight: the plan ends at midnight
        sleep = DAY_END
    agenda = AGENDAS["weekend" if weekend else role]
    split = agenda.index((None, None))
    items: list[dict[str, Any]] = []
    clock = wake
    for activity, length in agenda[:split]:
        end = _minutes(length) if isinstance(length, str) else clock + length
        end = min(end, sleep)
        if end > clock:
            items.append({"start": clock, "end": end, "activity": activity})
            clock = end
    tail: list[dict[str, Any]] = []
    back = sleep
    for activity, length in reversed(agenda[split + 1:]):
        start = max(back - length, clock)
        if back > start:
            tail.insert(0, {"start": start, "end": back, "activity": activity})
            back = start
    if back > clock:
        items.append({"start": clock, "end": back, "activity": _leisure(profile, now)})
    items.extend(tail)
    return {
        "date": now.date().isoformat(), "weekday": now.strftime("%A"), "role": role, "weekend": weekend,
        "wake": _hhmm(wake), "sleep": _hhmm(sleep),
        "items": [{"start": _hhmm(i["start"]), "end": _hhmm(i["end"]), "activity": i["activity"], "status": "pending"}
                  for i in items],
    }


def update_progress(plan: dict[str, Any], now: datetime) -> dict[str, Any]:
    minute = now.hour * 60 + now.minute
    plan["current"] = None
    for index, item in enumerate(plan["items"]):
        start, end = _minutes(item["start"]), _minutes(item["end"])
        if item["status"] in ("done", "skipped"):
            pass
        elif end <= minute:
            item["status"] = "done"
        elif start <= minute:
            item["status"] = "in_progress"
        if start <= minute < end:
            plan["current"] = index
    statuses = [i["status"] for i in plan["items"]]
    plan["progress"] = {"done": statuses.count("done"), "skipped": statuses.count("skipped"), "total": len(statuses)}
    plan["updated_at"] = now.isoformat()
    return plan


def _now(ctx: Any) -> datetime:
    if ctx.now is None:
        raise ValueError("no simulation time yet; plans are made during a step")
    return ctx.now


def _today(ctx: Any, *, force: bool = False) -> dict[str, Any]:
    now = _now(ctx)
    plan = ctx.read_state(STATE)
    if force or plan.get("date") != now.date().isoformat():
        plan = make_plan(ctx.profile, now)
        ctx.log(f"made the plan for {plan['date']} ({plan['role']}, {len(plan['items'])} items)")
    return update_progress(plan, now)


def _status(plan: dict[str, Any]) -> dict[str, Any]:
    current = plan["current"]
    upcoming = [i for i in plan["items"] if i["status"] == "pending"]
    return {"date": plan["date"], "now": plan["items"][current] if current is not None else "asleep or outside the plan",
            "next": upcoming[0] if upcoming else None, "progress": plan["progress"]}


def entrypoint(argv: list[str], ctx: Any) -> dict[str, Any] | str:
    command = argv[0] if argv else "make"
    if command == "make":
        plan = _today(ctx, force="--force" in argv[1:])
        ctx.write_state(STATE, plan)
        return plan
    if command == "status":
        plan = _today(ctx)
        ctx.write_state(STATE, plan)
        return _status(plan)
    if command in ("done", "skip"):
        plan = _today(ctx)
        index = int(argv[1]) if len(argv) > 1 else plan["current"]
        if index is None or not 0 <= index < len(plan["items"]):
            return f"error: no plan item {index!r} to mark (there are {len(plan['items'])})"
        plan["items"][index]["status"] = "done" if command == "done" else "skipped"
        plan = update_progress(plan, _now(ctx))
        ctx.write_state(STATE, plan)
        return _status(plan)
    return "error: usage: make [--force] | status | done [index] | skip [index]"


def post_step(ctx: Any) -> str:
    if ctx.now is None:
        return "no simulation time; plan not updated"
    plan = _today(ctx)
    ctx.write_state(STATE, plan)
    current = plan["current"]
    doing = plan["items"][current]["activity"] if current is not None else "asleep"
    progress = plan["progress"]
    return f"plan {plan['date']}: now {doing}; {progress['done']}/{progress['total']} done"
