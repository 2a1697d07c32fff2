"""The data the docs' examples score, shared by tests/test_docs_examples.py (the loopback Hub's `me/reviews`)
and docs/screenshots.py (the pictures of the report page)."""

# `me/reviews`: questions and the answers to review (two of them wrong)
REVIEWS = [
    ("What is the capital of France?", "Paris."),
    ("How many legs does a spider have?", "Eight."),
    ("What is 12 times 12?", "144."),
    ("Which planet is closest to the Sun?", "Mercury."),
    ("What gas do plants take in for photosynthesis?", "Carbon dioxide."),
    ("Who wrote 'Pride and Prejudice'?", "Jane Austen."),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees."),
    ("What is the square root of 81?", "9."),
    ("Which ocean is the largest?", "The Atlantic Ocean."),
    ("What is the chemical symbol for gold?", "Au."),
    ("How many continents are there?", "Seven."),
    ("What is the longest river in Africa?", "The Nile."),
    ("In which year did the first person walk on the Moon?", "1969."),
    ("What is the freezing point of water in Fahrenheit?", "32 degrees."),
    ("What language has the most native speakers?", "English."),
    ("How many sides does a hexagon have?", "Six."),
    ("What is the smallest prime number?", "2."),
    ("Which organ pumps blood through the body?", "The heart."),
    ("What is the largest mammal?", "The blue whale."),
    ("What does CPU stand for?", "Central processing unit."),
]


# A few pairs in ScalerLab/JudgeBench's layout (data/gpt-00000-of-00001.jsonl), for `--benchmark judgebench`
JUDGEBENCH = [
    {
        "pair_id": f"gpt-4o-{i}",
        "original_id": 1000 + i,  # an int on the Hub for mmlu-pro rows (null for the others)
        "source": "mmlu-pro-math",
        "question": f"What is {i} + {i}?",
        "response_model": "gpt-4o-2024-05-13",
        "response_A": f"{2 * i}" if i % 3 else f"{2 * i + 1}",
        "response_B": f"{2 * i + 1}" if i % 3 else f"{2 * i}",
        "label": "A>B" if i % 3 else "B>A",
    }
    for i in range(12)
]
