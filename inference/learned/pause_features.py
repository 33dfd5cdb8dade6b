"""What the learned pause policy looks at in one decode step: the recent clause's words
and characters, risky wording (absolute words, numbers with units, negations, commitments,
domain terms) and the step's signals, as named features hashed into a fixed-size vector.

Named first, hashed second: the names are what a reviewer reads in a decision's reason;
the hashed indices are what the classifier multiplies. The hash is CRC-32 (stable across
processes and machines, unlike Python's salted ``hash``).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import regex

FEATURE_VERSION = 1  # bump when extraction changes: models trained on older features refuse to load
HASH_BITS = 18
CLAUSE_CHARS = 80  # the recent text a step is judged by, cut at the last sentence boundary
NEWEST_SLACK = 2  # a cue counts as "just completed" if it ends this close to the newest text

_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
# A boundary ends a sentence or a list item; "." only before whitespace, so "2.5" stays whole.
_BOUNDARY = regex.compile(r"[.!?](?=\s)|[。！？；;\n]")
# Units of the n-grams: a number (shape only), a Latin word, one CJK character, a sign.
_UNIT = regex.compile(
    rf"(?P<num>\d+(?:[.,:/]\d+)*)|(?P<word>[^\W\d{_CJK}_]+(?:['-][^\W\d_]+)*)"
    rf"|(?P<cjk>[{_CJK}])|(?P<sign>[%°℃$€£¥/])"
)
# One simulated token, split as ``policies.simulated_tokens`` splits sample text.
_PIECE = regex.compile(rf"\s*(?:[{_CJK}]|[^\W{_CJK}]+|[^\w\s])|\s+")


def _words(words: str) -> regex.Pattern:
    """One case-insensitive alternation of "|"-separated entries; Latin entries match whole
    words, CJK ones anywhere."""
    parts = []
    for word in sorted(words.split("|"), key=len, reverse=True):
        body = r"\s+".join(regex.escape(part) for part in word.split())
        parts.append(body if regex.match(rf"[{_CJK}]", word) else rf"(?<!\w){body}(?!\w)")
    return regex.compile("|".join(parts), regex.IGNORECASE)


_NUMBER = r"(?:\d+(?:[.,]\d+)*|[一二两三四五六七八九十百千万]+)"
LEXICONS: dict[str, regex.Pattern] = {
    "absolute": _words(
        "always|never|guaranteed|guarantee|definitely|certainly|completely|absolutely|"
        "undoubtedly|no doubt|without doubt|zero|every|all|unconditionally|irrevocably|"
        "irrevocable|in no event|under no circumstances|ever|only|exclusively|"
        "necessarily|essential|critical|must|100%|一定|总是|绝对|百分之百|毫无疑问|完全|从不|从未|肯定|始终|永远|"
        "无条件|所有|任何|必须|必然|仅|只能|保证|为零"
    ),
    "hedge": _words(
        "may|might|could|possibly|possible|likely|suspected|consider|appears|seems|"
        "suggests|unclear|differential|pending|subject to|to be confirmed|arguable|"
        "optionally|preferably|for example|in some embodiments|alternatively|"
        "not limited to|可能|或|似|考虑|疑似|怀疑|倾向|待|尚不清楚|可选|例如|或者|优选|建议"
    ),
    "negation": _words(
        "not|no|never|none|neither|nor|without|denies|free of|cannot|n't|不|无|未|没有|否认|非|"
        "禁|勿"
    ),
    "commitment": _words(
        "shall|will|agrees|agree|undertakes|hereby|bound|liable|indemnify|waives|"
        "assigns|guarantees|accepted|approved|confirmed|declined|rejected|denied|"
        "covered|cover|insured|uninsurable|must|应当|承担|同意|承诺|特此|放弃|转让|须|义务|承保|赔付|核准|拒保|"
        "拒赔|拒绝|生效|保障|确诊|诊断|构成|无效|有效|侵犯|授权"
    ),
    "certainty": _words(
        "clearly|certainly|definitely|undoubtedly|unenforceable|invalid|void|infringes|"
        "novel|non-obvious|will be granted|in material breach|confirmed|"
        "final diagnosis|impression|diagnosis|显然|必将|确诊|诊断|明确|患有|具备|肯定"
    ),
}
# A number followed by a unit of dose, money, share or a physical limit: what a reviewer checks.
_DOSE_UNITS = (
    r"mg|g|mcg|µg|μg|kg|mg/kg|mL|ml|L|IU|units?|mmol|mEq|mL/h|ml/h|毫克|克|微克|单位|毫升|"
    r"%|wt%|°C|℃|mm|nm|bar|V|GHz|Hz|毫米|纳米|伏|巴|元|万元|美元|欧元|million|per\s+annum"
)
_DURATION_UNITS = r"days?|weeks?|months?|years?|hours?|天|日|周|月|年|小时"
PATTERNS: dict[str, regex.Pattern] = {
    "number": regex.compile(_NUMBER),
    "number_unit": regex.compile(rf"{_NUMBER}\s*(?:{_DOSE_UNITS})(?![a-zA-Z])", regex.IGNORECASE),
    "money": regex.compile(r"(?:USD|EUR|GBP|RMB|\$|€|£|¥|人民币)\s*\d|\d\s*(?:元|美元|欧元)"),
    "number_duration": regex.compile(rf"{_NUMBER}\s*(?:{_DURATION_UNITS})(?![a-zA-Z])", regex.I),
    "frequency": regex.compile(
        r"(?<!\w)(?:once|twice|three times|daily|nightly|bd|tds|qds|qd|bid|tid|prn|every\s+\d+\s+"
        r"hours?|per\s+(?:day|week))(?!\w)|每日|每晚|每天|每\d+小时|一次|两次|三次",
        regex.IGNORECASE,
    ),
    "age_or_date": regex.compile(
        r"\d+-year-old|\d+\s*岁|\b(?:19|20)\d\d\b|\d+月\d+日|\d{4}年", regex.IGNORECASE
    ),
    "claim_ref": regex.compile(r"(?:claims?|FIG\.|clause|section|权利要求|第)\s*\d", regex.I),
}
DOMAIN_TERMS: dict[str, regex.Pattern] = {
    "clinical-note": _words(
        "dose|contraindicated|allergy|avoid|withhold|hold|iv|oral|diagnosis|impression|"
        "infarction|embolism|pneumonia|appendicitis|剂量|禁用|禁忌|过敏|停用|静脉|口服|诊断|梗死|栓塞|肺炎"
    ),
    "contract-review": _words(
        "liability|liable|indemnify|indemnity|warranty|terminate|breach|penalty|"
        "damages|assign|assignment|waive|consent|cap|责任|赔偿|违约|终止|转让|保证|放弃|同意|违约金|上限"
    ),
    "underwriting": _words(
        "cover|covered|claim|premium|deductible|excess|loading|exclusion|excluded|"
        "decline|waiting period|sum insured|limit|bind|承保|理赔|保费|免赔额|加费|除外|拒保|等待期|保额|限额|"
        "赔付"
    ),
    "patent-claims": _words(
        "wherein|comprising|consists|processor|screen|memory|battery|glue|sensor|"
        "prior art|novel|inventive|infringes|其中|包括|由|处理器|屏幕|内存|电池|胶水|现有技术|新颖性|创造性"
    ),
}


@dataclass(frozen=True)
class Step:
    """The part of a decode step the features read: text so far, where the newest token's
    text starts, and that token's signals (None where unknown, as in hand-labelled text)."""

    text: str
    new_text_start: int
    top1_prob: float | None = None
    entropy: float | None = None

    @classmethod
    def from_signals(
        cls, text: str, new_text_start: int, signals: Mapping[str, Any] | None
    ) -> Step:
        signals = signals or {}
        return cls(text, new_text_start, signals.get("top1_prob"), signals.get("entropy"))


def prior_step(text: str, top1_prob: float | None = None, entropy: float | None = None) -> Step:
    """The step that ended with `text` when where its newest token began is not known (the
    step before the current one; the end of a hand-labelled prefix): its last word, CJK
    character or mark stands in for that token, split as ``policies.simulated_tokens`` does."""
    pieces = _PIECE.findall(text[-CLAUSE_CHARS:])
    return Step(text, len(text) - len(pieces[-1]) if pieces else 0, top1_prob, entropy)


def clause_start(text: str) -> int:
    """Offset where the recent clause begins: after the last sentence boundary, at most
    CLAUSE_CHARS back. A boundary in the newest character itself is ignored, so the
    token that ends a sentence is still judged with the sentence it ends."""
    start = max(0, len(text) - CLAUSE_CHARS)
    last = None
    for match in _BOUNDARY.finditer(text, start, max(start, len(text) - 1)):
        last = match
    return last.end() if last is not None else start


def features(step: Step) -> dict[str, float]:
    """Named features of one step, each with its value (most are 1.0 indicators)."""
    start = clause_start(step.text)
    clause = step.text[start:]
    newest = max(0, step.new_text_start - start - NEWEST_SLACK)
    found: dict[str, float] = {"bias": 1.0}
    ngrams(clause, found)
    cues(clause, newest, found)
    signal_features(step, found)
    return found


def units(clause: str) -> list[str]:
    """The clause as n-gram units: words lowercased, numbers by shape, CJK by character."""
    out = []
    for match in _UNIT.finditer(clause):
        kind = match.lastgroup
        out.append("#" if kind == "num" else match.group().lower())
    return out


def ngrams(clause: str, found: dict[str, float]) -> None:
    seq = units(clause)
    for n in (1, 2, 3):
        for i in range(len(seq) - n + 1):
            found[f"g{n}:{' '.join(seq[i : i + n])}"] = 1.0
    for n in (1, 2):  # where the step stands: the newest units, whatever came before
        if len(seq) >= n:
            found[f"end{n}:{' '.join(seq[-n:])}"] = 1.0


def cues(clause: str, newest: int, found: dict[str, float]) -> None:
    """Lexicon and pattern hits in the clause; a second feature when one ends in the newest
    text, which is what lets the policy fire at the token that completes a cue."""
    for table in (LEXICONS, PATTERNS, DOMAIN_TERMS):
        for name, pattern in table.items():
            ends = [m.end() for m in pattern.finditer(clause)]
            if not ends:
                continue
            found[f"cue:{name}"] = 1.0
            if ends[-1] > newest:
                found[f"new:{name}"] = 1.0
    if "cue:negation" in found and "cue:hedge" not in found:
        found["cue:negation_unhedged"] = 1.0
    if "new:number_unit" in found and "cue:frequency" in found:
        found["cue:dose_with_frequency"] = 1.0


def signal_features(step: Step, found: dict[str, float]) -> None:
    """Centred so that a missing signal (value 0) is neutral: a model trained only on
    hand-labelled text leaves these weights at zero."""
    if step.top1_prob is not None:
        found["sig:top1"] = step.top1_prob - 0.5
        if "cue:absolute" in found:
            found["sig:top1_x_absolute"] = step.top1_prob - 0.5
    if step.entropy is not None:
        found["sig:entropy"] = min(step.entropy, 6.0) / 3.0 - 0.5


def hashed(found: dict[str, float], bits: int = HASH_BITS) -> tuple[list[int], list[float]]:
    """Indices and values of the named features in a 2**bits vector."""
    mask = (1 << bits) - 1
    indices = [zlib.crc32(name.encode()) & mask for name in found]
    return indices, list(found.values())


CUE_LABELS = {
    "absolute": "absolute wording",
    "hedge": "hedged wording",
    "negation": "a negation",
    "negation_unhedged": "an unhedged negation",
    "commitment": "a commitment",
    "certainty": "a statement of certainty",
    "number": "a number",
    "number_unit": "a number with a unit",
    "money": "an amount of money",
    "number_duration": "a duration",
    "frequency": "a dose frequency",
    "dose_with_frequency": "a dose with its frequency",
    "age_or_date": "an age or a date",
    "claim_ref": "a claim or clause reference",
}

SIGNAL_LABELS = {
    "top1": "top-1 probability",
    "entropy": "entropy",
    "top1_x_absolute": "a confident token near absolute wording",
}
_CJK_GAP = regex.compile(rf"(?<=[{_CJK}]) (?=[{_CJK}])")


def describe(name: str) -> str:
    """A feature name as a reviewer reads it in a decision's reason. A cue and the same
    cue "just written" read alike, so a reason names it once."""
    kind, _, rest = name.partition(":")
    if kind in ("cue", "new"):
        return CUE_LABELS.get(rest, f"{rest.replace('-', ' ')} term")
    if kind == "sig":
        return SIGNAL_LABELS.get(rest, rest)
    words = _CJK_GAP.sub("", rest.replace("#", "<number>"))
    return f'ends in "{words}"' if kind.startswith("end") else f'"{words}"'
