"""Demo domains, glossaries and users, modelled on real review practice."""

from __future__ import annotations

from typing import Any

DOMAINS = [
    {
        "name": "Clinical note",
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

# Pause policies per domain, modelled on where a human reviewer would want to look.
POLICIES: dict[str, list[dict[str, Any]]] = {
    "clinical-note": [
        {
            "name": "Recommendation",
            "kind": "keyword",
            "params": {"keywords": ["recommend", "建议"]},
        },
        {
            "name": "Low confidence",
            "kind": "low_confidence",
            "params": {"threshold": 0.35},
            "cooldown": 8,
        },
        {
            "name": "Overconfidence",
            "kind": "overconfidence",
            "params": {"threshold": 0.92},
            "cooldown": 20,
        },
    ],
    "contract-review": [
        {
            "name": "Force majeure",
            "kind": "keyword",
            "params": {"keywords": ["force majeure", "不可抗力"]},
        },
        {"name": "Liability", "kind": "keyword", "params": {"keywords": ["liability", "违约责任"]}},
    ],
    "underwriting": [
        {
            "name": "Three-stage review",
            "kind": "sentence_count",
            "params": {"every": 1, "max_pauses": 3},
        },
    ],
    "patent-claims": [
        {"name": "Processor term", "kind": "keyword", "params": {"keywords": ["processor"]}},
    ],
}

REVIEWERS = {
    "clinical-note": "dr_chen",
    "contract-review": "lawyer_li",
    "underwriting": "underwriter_wu",
    "patent-claims": "attorney_zhao",
}
ADMIN_USERNAME = "admin"
