"""A small archival-memory corpus and paraphrased queries for ranking tests."""

PASSAGES: dict[str, str] = {
    "p01": "The user's favourite programming language is Rust, because of its memory safety.",
    "p02": "Sarah has a golden retriever named Biscuit who loves swimming in the lake.",
    "p03": "The quarterly budget meeting was moved from Tuesday to Thursday afternoon.",
    "p04": "To reset the router, hold the power button for ten seconds until the lights blink.",
    "p05": "My grandmother's apple pie recipe uses cinnamon, nutmeg and a buttery crust.",
    "p06": "The user is allergic to peanuts and carries an epinephrine injector.",
    "p07": "Our team deploys the backend service to Kubernetes every Friday morning.",
    "p08": "The flight to Tokyo departs at 9:40 pm from terminal 2 on March 14th.",
    "p09": "Marcus prefers email over phone calls and replies within a day.",
    "p10": "The office coffee machine is broken; the repair technician visits on Monday.",
    "p11": "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "p12": "The user is training for a marathon and runs forty kilometres each week.",
    "p13": "Invoices must be approved by the finance director before payment is issued.",
    "p14": "The database migration failed because a foreign key constraint was violated.",
    "p15": "Emma is learning to play the cello and practises scales every evening.",
    "p16": "The apartment lease expires in August and the rent will increase by five percent.",
    "p17": "The garden tomatoes were damaged by an early frost last October.",
    "p18": "The user's daughter starts kindergarten in September at Maple Street School.",
    "p19": "Password resets require verifying the account through a code sent by text message.",
    "p20": "The conference keynote discussed climate change and renewable energy investment.",
}

# (query, the passage that must rank first): paraphrases that share key words or word pieces.
QUERIES: list[tuple[str, str]] = [
    ("Which programming languages does the user like best?", "p01"),
    ("What is the name of Sarah's dog?", "p02"),
    ("When is the budget meeting now?", "p03"),
    ("how do I reset my router", "p04"),
    ("grandma's pie with cinnamon", "p05"),
    ("does the user have any food allergies", "p06"),
    ("when do we deploy to kubernetes", "p07"),
    ("what time does the Tokyo flight leave", "p08"),
    ("How does Marcus like to be contacted? Email or phone?", "p09"),
    ("who approves invoices before payments", "p13"),
    ("why did the migration of the database fail", "p14"),
    ("running a marathon training plan", "p12"),
]

# More paraphrases (written after the weights were chosen, as a hold-out check).
MORE_QUERIES: list[tuple[str, str]] = [
    ("Who is Biscuit?", "p02"),
    ("coffee machine repair", "p10"),
    ("when does Emma practice the cello", "p15"),
    ("rent increase when the lease expires", "p16"),
    ("frost damaged the tomatoes", "p17"),
    ("which school will the daughter attend", "p18"),
    ("verify the account to reset a password", "p19"),
    ("renewable energy keynote", "p20"),
    ("how do plants turn sunlight into sugar", "p11"),
    ("apple pie ingredients", "p05"),
    ("deployment schedule for the backend", "p07"),
    ("the user runs a lot", "p12"),
    ("peanut allergy", "p06"),
    ("foreign keys broke the migration", "p14"),
]
