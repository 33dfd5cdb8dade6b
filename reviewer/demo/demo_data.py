"""Demo domains, glossaries and users, modelled on real review practice."""

from __future__ import annotations

from typing import Any

DOMAINS = [
    {
        "name": "Clinical note",
        "name_zh": "临床病历",
        "slug": "clinical-note",
        "specialty": "medical",
        "system_prompt": (
            "You are a clinical documentation assistant. Write concise, factual clinical notes "
            "for a physician to review. Use standard terminology and do not invent findings."
        ),
        "glossary": "Clinical terminology (ICD-10)",
        "terms": [
            ("heart attack", "acute myocardial infarction", "I21.9", "Prefer the clinical term."),
            ("high blood pressure", "essential (primary) hypertension", "I10", ""),
            ("sugar diabetes", "type 2 diabetes mellitus", "E11.9", "Specify type."),
            ("stroke", "cerebral infarction", "I63.9", "Distinguish from haemorrhage."),
            ("chest pain", "chest pain, unspecified", "R07.9", ""),
            ("shortness of breath", "dyspnoea", "R06.00", ""),
            ("kidney failure", "chronic kidney disease", "N18.9", "Stage if known."),
            ("lung infection", "pneumonia, unspecified organism", "J18.9", ""),
            ("irregular heartbeat", "atrial fibrillation", "I48.91", "Confirm on ECG."),
            ("blood clot in the leg", "deep vein thrombosis of lower extremity", "I82.40", ""),
            ("underactive thyroid", "hypothyroidism", "E03.9", ""),
            ("asthma attack", "asthma with acute exacerbation", "J45.901", ""),
        ],
    },
    {
        "name": "Contract review",
        "name_zh": "合同审查",
        "slug": "contract-review",
        "specialty": "legal",
        "system_prompt": (
            "You are a contract review assistant for a lawyer. Summarise clauses precisely, "
            "flag obligations and risks, and never state legal conclusions as certain."
        ),
        "glossary": "Contract clauses",
        "terms": [
            ("act of God", "force majeure event", "FM", "Use the defined term."),
            ("penalty", "liquidated damages", "LD", "Penalty clauses may be unenforceable."),
            ("cancel", "terminate for convenience", "TERM-C", ""),
            ("breach", "material breach", "TERM-B", "Qualify materiality."),
            ("secret information", "confidential information", "CONF", ""),
            ("pay back", "indemnify and hold harmless", "INDEM", ""),
            ("limit of liability", "limitation of liability", "LOL", ""),
            ("which law applies", "governing law", "GOV", ""),
            ("court", "exclusive jurisdiction", "JUR", ""),
            ("handing over the contract", "assignment", "ASSIGN", "Check consent requirements."),
            ("warranty", "representations and warranties", "R&W", ""),
            ("renewal", "automatic renewal", "RENEW", "Check notice period."),
        ],
    },
    {
        "name": "Underwriting",
        "name_zh": "核保",
        "slug": "underwriting",
        "specialty": "insurance",
        "system_prompt": (
            "You are an underwriting assistant. Assess the described risk step by step for an "
            "underwriter, one consideration per sentence, citing the relevant factor."
        ),
        "glossary": "Underwriting terms",
        "terms": [
            ("excess", "deductible", "DED", ""),
            ("top limit", "policy limit", "LIM", ""),
            ("extra cost for risk", "risk loading", "LOAD", ""),
            ("existing illness", "pre-existing condition", "PEC", "Disclosure required."),
            ("claims history", "loss history", "LH", ""),
            ("chance of loss", "probability of loss", "PL", ""),
            ("not covered", "exclusion", "EXCL", ""),
            ("waiting time", "waiting period", "WP", ""),
            ("shared insurance", "reinsurance", "RE", ""),
            ("big claim", "large loss", "LL", ""),
            ("fire risk class", "fire protection class", "FPC", ""),
            ("flood area", "flood zone", "FZ", "Check the flood map."),
        ],
    },
    {
        "name": "Patent claims",
        "name_zh": "专利权利要求",
        "slug": "patent-claims",
        "specialty": "patent",
        "system_prompt": (
            "You are a patent drafting assistant. Draft clear, supported claim language for a "
            "patent attorney to review, using consistent terms throughout."
        ),
        "glossary": "Claim terminology (IPC)",
        "terms": [
            ("processor", "processing unit", "G06F 9/00", "Use the term defined in the spec."),
            ("memory", "non-transitory computer-readable medium", "G06F 12/00", ""),
            ("neural network", "artificial neural network", "G06N 3/02", ""),
            ("screen", "display device", "G09G 5/00", ""),
            ("battery", "electrochemical energy storage cell", "H01M 10/00", ""),
            ("sensor", "detection unit", "G01D 21/00", ""),
            ("wireless link", "radio communication link", "H04W 4/00", ""),
            ("drug", "pharmaceutical composition", "A61K 9/00", ""),
            ("engine", "internal combustion engine", "F02B 75/00", ""),
            ("glue", "adhesive composition", "C09J 5/00", ""),
            ("image recognition", "image recognition by pattern matching", "G06V 10/75", ""),
            ("encryption", "cryptographic mechanism", "H04L 9/00", ""),
        ],
    },
]

# Pause policies per domain, modelled on where a human reviewer would want to look, and
# tuned to pause at most 3 times per 200 generated tokens in median on CASES below.
POLICIES: dict[str, list[dict[str, Any]]] = {
    "clinical-note": [
        {
            "name": "Recommendation",
            "name_zh": "建议",
            "kind": "keyword",
            "params": {"keywords": ["recommend", "建议"]},
        },
        {
            # SmolLM2's top-1 is below 0.35 on a third of a note's tokens: 0.1 leaves the
            # moments it weighs ten or more continuations, and at most one per 60 tokens.
            "name": "Low confidence",
            "name_zh": "低置信度",
            "kind": "low_confidence",
            "params": {"threshold": 0.1},
            "cooldown": 60,
        },
        {
            "name": "Overconfidence",
            "name_zh": "过度自信",
            "kind": "overconfidence",
            "params": {"threshold": 0.92},
            "cooldown": 20,
        },
    ],
    "contract-review": [
        {
            "name": "Force majeure",
            "name_zh": "不可抗力",
            "kind": "keyword",
            "params": {"keywords": ["force majeure", "不可抗力"]},
        },
        {
            "name": "Liability",
            "name_zh": "责任",
            "kind": "keyword",
            "params": {"keywords": ["liability", "违约责任"]},
        },
    ],
    "underwriting": [
        {
            "name": "Three-stage review",
            "name_zh": "三段式审查",
            "kind": "sentence_count",
            # two pauses split the assessment into three stages, two sentences apart
            "params": {"every": 2, "max_pauses": 2},
        },
    ],
    "patent-claims": [
        {
            "name": "Processor term",
            "name_zh": "处理器术语",
            "kind": "keyword",
            "params": {"keywords": ["processor"]},
        },
    ],
}

REVIEWERS = {
    "clinical-note": "dr_chen",
    "contract-review": "lawyer_li",
    "underwriting": "underwriter_wu",
    "patent-claims": "attorney_zhao",
}
ADMIN_USERNAME = "admin"

# What an application calling the gateway receives: the review-heavy domains nothing before a
# reviewer approves; underwriting (lower risk) streams one sentence behind the model.
DELIVERY: dict[str, dict[str, Any]] = {
    "underwriting": {"delivery_mode": "delayed", "delay_sentences": 1},
}
APPLICATION_NAME = "Demo application"  # bound to every demo domain; its key is in var/

# Case texts a reviewer of each demo domain would start from, with fixed seeds: the demo's
# pause policies are tuned so that these pause at most 3 times per 200 generated tokens in
# median (tests/test_demo_pause_rate.py measures them with the real model). The clinical
# cases mark their key spans as anchors, which gated attention keeps in view; the engine
# strips the markup, so under full attention (the demo's default) the model reads the same.
CASES: dict[str, list[dict[str, Any]]] = {
    "clinical-note": [
        {
            "seed": 11,
            "input": (
                "Write a progress note: 64-year-old man, <ANCHOR:symptoms>2 days of chest pain"
                " on exertion</ANCHOR>, <ANCHOR:findings>blood pressure 150/95</ANCHOR>, "
                "<ANCHOR:diagnosis>known high blood pressure and sugar diabetes</ANCHOR>, "
                "<ANCHOR:ecg>ECG shows no ST elevation</ANCHOR>, <ANCHOR:follow-up>troponin "
                "pending</ANCHOR>."
            ),
        },
        {
            "seed": 12,
            "input": (
                "Summarise this admission for the discharge letter: <ANCHOR:patient>71-year-old"
                " woman</ANCHOR> admitted with <ANCHOR:diagnosis>a lung infection</ANCHOR>, "
                "<ANCHOR:treatment>treated with amoxicillin for 5 days</ANCHOR>, "
                "<ANCHOR:findings>oxygen weaned</ANCHOR>, <ANCHOR:follow-up>now walking "
                "independently</ANCHOR>."
            ),
        },
        {
            "seed": 13,
            "input": (
                "为一位有<ANCHOR:diagnosis>高血压和2型糖尿病</ANCHOR>的<ANCHOR:patient>58岁女性"
                "</ANCHOR>写一份<ANCHOR:follow-up>门诊随访记录</ANCHOR>,<ANCHOR:findings>"
                "血压控制良好</ANCHOR>。"
            ),
        },
    ],
    "contract-review": [
        {
            "seed": 21,
            "input": (
                "Summarise the risks in this clause: 'The Supplier shall not be liable for any "
                "delay caused by events beyond its reasonable control, including strikes and "
                "floods. Total liability is capped at the fees paid in the last 12 months.'"
            ),
        },
        {
            "seed": 22,
            "input": (
                "Review the termination clause: either party may terminate for convenience "
                "with 30 days' notice; the customer pays all fees accrued to that date."
            ),
        },
        {
            "seed": 23,
            "input": "总结这份租赁合同中的违约责任条款和不可抗力条款的主要风险。",
        },
    ],
    "underwriting": [
        {
            "seed": 31,
            "input": (
                "Assess the fire risk of a three-storey timber-frame restaurant with a deep "
                "fryer, no sprinklers, 12 km from the nearest fire station."
            ),
        },
        {
            "seed": 32,
            "input": (
                "Assess a life insurance application: 45-year-old non-smoker, BMI 31, treated "
                "high blood pressure, father died of a heart attack at 60."
            ),
        },
        {
            "seed": 33,
            "input": "评估一个位于洪水区的仓库的财产保险风险,仓库存放电子产品。",
        },
    ],
    "patent-claims": [
        {
            "seed": 41,
            "input": (
                "Draft an independent claim for a smartwatch that uses a sensor and a neural "
                "network on a processor to detect falls and alert a caregiver over a wireless "
                "link."
            ),
        },
        {
            "seed": 42,
            "input": (
                "Draft a method claim for charging a battery in stages, where the current is "
                "reduced when the cell temperature exceeds a threshold."
            ),
        },
        {
            "seed": 43,
            "input": "为一种利用图像识别检测道路裂缝的无人机系统起草一项独立权利要求。",
        },
    ],
}

# Written to make the model sound certain: the clinical note's overconfidence rule (a
# confident token right after absolute wording) must still fire on it.
OVERCONFIDENT_CASE: dict[str, Any] = {
    "domain": "clinical-note",
    "seed": 7,
    "input": (
        "Write one sentence for the patient that starts exactly with: 'This medicine is "
        "definitely safe and 100% guaranteed to cure your infection, so'"
    ),
}
