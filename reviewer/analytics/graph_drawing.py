"""Where each node of an audit graph sits in its drawing: columns read left to right from the
signals to the decision (readings and outside events, the policy, the event itself, the
reviewer's actions, the decision); the page draws the boxes and arrows as SVG."""

from __future__ import annotations

import unicodedata
from typing import Any

from django.utils.translation import gettext_lazy as _

from reviewer.analytics.graph_story import label

# What an arrow says when pointed at (the graph keeps the relation's own name).
RELATIONS = {
    "informed": _("informed"),
    "preceded": _("preceded"),
    "caused": _("caused"),
    "asked_for": _("asked for"),
    "paused": _("paused"),
    "rolled_back": _("rolled back"),
    "flagged": _("flagged"),
    "suppressed": _("suppressed by the pause budget"),
    "fired": _("fired"),
    "followed_by": _("followed by"),
    "muted": _("muted"),
}

COLUMNS = {"reading": 0, "outside": 0, "request": 0, "policy": 1, "subject": 2, "action": 3}
COLUMNS["decision"] = 4
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 196, 48, 40, 14, 8
LANE = 22  # above and below the boxes: where an arrow that skips a column runs
TEXT_UNITS = 30  # what fits on one line of a box, a wide (CJK) character counting two


def drawing(graph: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    nodes = graph.get("nodes", [])
    used = sorted({COLUMNS[n["type"]] for n in nodes})
    column = {c: i for i, c in enumerate(used)}  # empty columns take no room
    stacks: dict[int, list[dict[str, Any]]] = {}
    for node in nodes:
        stacks.setdefault(column[COLUMNS[node["type"]]], []).append(node)
    rows = max((len(s) for s in stacks.values()), default=1)
    height = 2 * (MARGIN + LANE) + rows * BOX_H + (rows - 1) * GAP_Y
    boxes = {}
    for col, stack in stacks.items():
        top = (height - len(stack) * BOX_H - (len(stack) - 1) * GAP_Y) / 2
        for row, node in enumerate(stack):
            boxes[node["id"]] = box(node, names, col, top + row * (BOX_H + GAP_Y))
    width = MARGIN * 2 + len(used) * BOX_W + (len(used) - 1) * GAP_X
    arrows = [arrow(e, boxes, height) for e in graph.get("edges", []) if e["from"] in boxes]
    return {"width": width, "height": height, "boxes": list(boxes.values()), "arrows": arrows}


def box(node: dict[str, Any], names: dict[str, str], col: int, y: float) -> dict[str, Any]:
    title, second = label(node, names)
    x, top = MARGIN + col * (BOX_W + GAP_X), round(y)
    return {
        "id": node["id"],
        "type": node["type"],
        "x": x,
        "y": top,
        "w": BOX_W,
        "h": BOX_H,
        "text_x": x + 8,
        "title_y": top + 19,
        "second_y": top + 37,
        "title": fit(title),
        "second": fit(second),
        "full": f"{title} — {second}" if second else title,
    }


def arrow(edge: dict[str, str], boxes: dict[str, dict[str, Any]], height: int) -> dict[str, Any]:
    source, target = boxes[edge["from"]], boxes[edge["to"]]
    x1, y1 = source["x"] + source["w"], source["y"] + source["h"] / 2
    if target["x"] - x1 == GAP_X:  # to the next column: right side to left side
        x2, y2 = target["x"], target["y"] + target["h"] / 2
        mid = (x1 + x2) / 2
        path = f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"
    elif source["x"] == target["x"]:  # one action to the next, below it
        x = source["x"] + source["w"] / 2
        path = f"M{x},{source['y'] + source['h']} L{x},{target['y']}"
    else:  # past a column, or back (a mute to its policy): along a lane, onto the box
        path = lane_path(source, target, height)
    relation = edge["relation"]
    return {"path": path, "relation": relation, "says": str(RELATIONS.get(relation, relation))}


def lane_path(source: dict[str, Any], target: dict[str, Any], height: int) -> str:
    """Above the boxes from the upper half of the drawing, below them from the lower half."""
    up = source["y"] + source["h"] / 2 <= height / 2
    forward = target["x"] > source["x"]
    offset = LANE / 2 if forward else LANE / 4  # a back arrow on a lane of its own
    lane = MARGIN + offset if up else height - MARGIN - offset
    x1 = source["x"] + source["w"] if forward else source["x"] + source["w"] / 2
    y1 = (
        source["y"] + source["h"] / 2
        if forward
        else (source["y"] if up else source["y"] + source["h"])
    )
    x2 = target["x"] + target["w"] / 2
    y2 = target["y"] if up else target["y"] + target["h"]
    bend, turn = (16, -16) if forward else (0, 16)
    return (
        f"M{x1},{y1} C{x1 + bend},{y1} {x1 + bend},{lane} {x1 + 2 * bend},{lane}"
        f" L{x2 + turn},{lane} Q{x2},{lane} {x2},{y2}"
    )


def fit(text: str, units: int = TEXT_UNITS) -> str:
    """``text`` cut to what a box holds, with an ellipsis when cut."""
    used, kept = 0, list[str]()
    for char in text:
        used += 2 if unicodedata.east_asian_width(char) in "WF" else 1
        if used > units:
            return "".join(kept).rstrip() + "…"
        kept.append(char)
    return text
