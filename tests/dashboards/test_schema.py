"""Every dashboard against the types of the Grafana the stack pins (docker-compose.yml: grafana-oss
11.6), as grafana-foundation-sdk of that version (pyproject's pin) defines them.

Each dashboard is read into the SDK's models (Dashboard.from_json, with the panel and query types
of its plugins), every value is checked against the type its field declares (strings, numbers,
enums, nested types, lists), and written back: nothing may be lost on the way (a field the types do
not know is dropped by from_json) and nothing changed. The one place the SDK's types do not reach is
a Prometheus annotation's query: Grafana 11.6 keeps it in `target` as a Prometheus query (its data
source moves a legacy top-level `expr` and `step` there when it loads a dashboard) and reads the
event fields (titleFormat, textFormat, tagKeys, useValueForTime) from the annotation itself; those
are checked against the SDK's Prometheus query type and Grafana's own field types here."""

from __future__ import annotations

import enum
import json
import re
import types
import typing
from pathlib import Path

import pytest
from grafana_foundation_sdk.cog import variants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import prometheus

from tests.dashboards.queries import NAMES, load

ROOT = Path(__file__).resolve().parents[2]
# Fields of a Prometheus annotation Grafana 11.6 reads from the annotation itself
# (public/app/plugins/datasource/prometheus: annotations.ts, processEvents), with their types.
PROMETHEUS_EVENT_FIELDS = {"titleFormat": str, "textFormat": str, "tagKeys": str, "useValueForTime": bool}
register_default_plugins()


def pinned_versions() -> tuple[str, str]:
    """(Grafana of the stack, Grafana flavour of the SDK pin)."""
    compose = re.search(r"grafana/grafana-oss:(\d+\.\d+)", (ROOT / "docker-compose.yml").read_text())[1]
    sdk = re.search(r"grafana-foundation-sdk==\d+!(\d+\.\d+)", (ROOT / "pyproject.toml").read_text())[1]
    return compose, sdk


def type_errors(value, hint, path: str) -> list[str]:
    """Where `value` (as a model's from_json left it) is not of the type `hint` declares."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:   # open, but a plugin's options and field config are typed
        return model_errors(value, path) if hasattr(value, "to_json") else []
    if isinstance(hint, typing.ForwardRef):
        hint = hint._evaluate(vars(model), {}, frozenset())
    if origin in (typing.Union, types.UnionType):
        attempts = [type_errors(value, arg, path) for arg in args if shaped_like(value, arg)]
        if not attempts:
            return [f"{path}: {value!r} is none of {hint}"]
        return min(attempts, key=len)   # the branch it is meant for says what is wrong inside
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} not in {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} where a list belongs"]
        return [e for n, item in enumerate(value) for e in type_errors(item, args[0], f"{path}[{n}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where a dict belongs"]
        if isinstance(value, dict) and args[1] in (object, typing.Any):
            return []
        return [e for key, item in value.items() for e in type_errors(item, args[1], f"{path}.{key}")]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [] if value in {m.value for m in hint} else [f"{path}: {value!r} is no {hint.__name__}"]
    if hint is float:
        return [] if isinstance(value, int | float) and not isinstance(value, bool) else [f"{path}: {value!r} no number"]
    if hint in (str, int, bool):
        ok = isinstance(value, hint) and (hint is bool or not isinstance(value, bool))
        return [] if ok else [f"{path}: {value!r} is no {hint.__name__}"]
    if isinstance(hint, type) and issubclass(hint, variants.Dataquery):
        if isinstance(value, UnknownDataquery):
            return [f"{path}: a query of no known data source type"]
        return model_errors(value, path)
    if isinstance(hint, type) and hasattr(hint, "from_json"):
        if isinstance(value, dict):   # some fields keep their JSON: read it as the type says, losing nothing
            parsed = hint.from_json(value)
            back = json.loads(json.dumps(parsed, cls=JSONEncoder))
            return model_errors(parsed, path) + [f"{path}: {d}" for d in differences(value, back)]
        return model_errors(value, path) if is_a(value, hint) else [f"{path}: {type(value).__name__}, "
                                                                     f"not {hint.__name__}"]
    return []   # a type the SDK leaves open (panel options of an unknown plugin are a dict)


def is_a(value, cls: type) -> bool:
    """An instance of `cls`, or of the SDK's copy of it in another plugin's module (xychart's
    MatcherConfig where the dashboard's is declared: the same JSON)."""
    return isinstance(value, cls) or type(value).__name__ == cls.__name__ and hasattr(value, "to_json")


def shaped_like(value, hint) -> bool:
    """Whether `value` is of the kind `hint` is (a list, a dict, a model, a scalar), whatever inside."""
    origin = typing.get_origin(hint) or hint
    if hint in (object, typing.Any):
        return True
    if hint is type(None):
        return value is None
    if origin in (list, dict):
        return isinstance(value, origin)
    if isinstance(origin, type) and (hasattr(origin, "from_json") or issubclass(origin, variants.Dataquery)):
        return is_a(value, origin)
    return not isinstance(value, list | dict) and value is not None


def model_errors(obj, path: str) -> list[str]:
    """Every field of a model instance against its declared type (its __init__'s annotations)."""
    if isinstance(obj, dict):
        return []
    hints = typing.get_type_hints(type(obj).__init__, vars(__import__(type(obj).__module__, fromlist=["*"])))
    return [e for name, hint in hints.items() if name != "return" and getattr(obj, name, None) is not None
            for e in type_errors(getattr(obj, name), hint, f"{path}.{name}")]


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"dropped {path}/{k}" for k in a if k not in b]
        out += [f"added {path}/{k}" for k in b if k not in a and b[k] not in ({}, [], None)]
        return out + [d for k in a if k in b for d in differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"length of {path}"]
        return [d for n, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{n}]")]
    return [] if a == b else [f"changed {path}: {a!r} -> {b!r}"]


def prometheus_annotation_errors(annotation: dict, where: str) -> list[str]:
    """A Prometheus annotation's own fields: no legacy ones left at the top, the query a Prometheus
    query of the SDK (round trip unchanged, fields typed), the event fields of Grafana's type."""
    errors = [f"{where}: legacy `{k}` (Grafana moves it into target)" for k in ("expr", "step") if k in annotation]
    target = annotation.get("target", {})
    query = prometheus.Dataquery.from_json(target)
    errors += model_errors(query, f"{where}.target")
    errors += [f"{where}.target: {d}" for d in differences(target, json.loads(json.dumps(query, cls=JSONEncoder)))]
    if not target.get("expr"):
        errors.append(f"{where}: no query in target.expr")
    for name, kind in PROMETHEUS_EVENT_FIELDS.items():
        if name in annotation and not isinstance(annotation[name], kind):
            errors.append(f"{where}.{name}: {annotation[name]!r} is no {kind.__name__}")
    return errors


def schema_errors(board: dict, name: str) -> list[str]:
    board = json.loads(json.dumps(board))
    errors = []
    for annotation in board["annotations"]["list"]:
        if annotation["datasource"]["type"] == "prometheus":   # checked here, then left to the SDK's fields
            errors += prometheus_annotation_errors(annotation, f"{name}: annotation {annotation['name']}")
            for field in (*PROMETHEUS_EVENT_FIELDS, "target"):
                annotation.pop(field, None)
    parsed = model.Dashboard.from_json(board)
    errors += model_errors(parsed, name)
    errors += [f"{name}: {d}" for d in differences(board, json.loads(json.dumps(parsed, cls=JSONEncoder)))]
    return errors


def test_the_sdk_is_the_grafana_of_the_stack():
    compose, sdk = pinned_versions()
    assert compose == sdk == "11.6", (compose, sdk)


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_passes_grafanas_types(name):
    assert schema_errors(load(name), name) == []


def test_the_check_finds_what_grafana_would_not_read():
    """A misspelt field, a wrong type, an unknown enum value, a legacy annotation: each is found."""
    board = load("overview")
    assert schema_errors(board, "overview") == []
    broken = json.loads(json.dumps(board))
    broken["panels"][1]["fieldConfig"]["defaults"]["unitt"] = "s"
    broken["panels"][1]["gridPos"]["w"] = "12"
    broken["panels"][1]["options"]["colorMode"] = "rainbow"
    legacy = next(a for a in broken["annotations"]["list"] if a["datasource"]["type"] == "prometheus")
    legacy["expr"], legacy["step"] = legacy["target"].pop("expr"), legacy["target"].pop("interval")
    errors = "\n".join(schema_errors(broken, "overview"))
    assert "dropped /panels[1]/fieldConfig/defaults/unitt" in errors
    assert "'12' is no int" in errors and "'rainbow' is no BigValueColorMode" in errors
    assert "legacy `expr`" in errors and "legacy `step`" in errors and "no query in target.expr" in errors
