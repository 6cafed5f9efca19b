"""Texts written for the tests (not taken from the tuning sets), shared by the tests of several layers."""

#: four unrelated subjects of three sentences each
TOPICS = [
    "The committee met on Monday. It approved the budget after a long debate. Members argued about taxes.",
    "Rain fell all night. The river rose quickly over its banks. Farmers moved their cattle to the hills.",
    "The orchestra tuned its instruments. The violins began a slow melody. The audience listened in silence.",
    "Engineers tested the new bridge. Trucks crossed it one by one. Sensors measured every small movement.",
]
#: TOPICS' paragraphs, each subject twice over, the four three times in turn: twelve paragraphs
TOPICS_TEXT = "\n\n".join(" ".join([t] * 2) for t in TOPICS * 3)

#: two subjects (cooking, astronomy) of three paragraphs of four sentences each
PARAGRAPHS = [
    "Boil a large pot of salted water for the pasta. Add the spaghetti and stir it so the strands do not stick. "
    "Cook it for nine minutes until it is firm to the bite. Drain it and keep a cup of the cooking water.",
    "For the sauce, warm olive oil in a wide pan. Fry sliced garlic until it turns golden. Add crushed tomatoes, "
    "a pinch of salt and fresh basil. Let the sauce simmer for twenty minutes while it thickens.",
    "Bread needs flour, water, yeast and salt. Knead the dough for ten minutes until it is smooth. Leave it to "
    "rise in a warm place for an hour. Bake the loaf in a hot oven until the crust is brown.",
    "The telescope was pointed at Jupiter after sunset. Its four largest moons appeared as bright points beside "
    "the planet. The great red spot rotated into view near midnight. Observers sketched the cloud bands by hand.",
    "Saturn rose later in the night. Its rings were tilted towards the Earth and looked wide open. The moon "
    "Titan shone faintly to the east. A camera recorded a thousand frames of the planet.",
    "A comet was discovered in the morning sky. Its tail pointed away from the Sun. Astronomers measured its "
    "orbit over several nights. It will return to the inner solar system in two hundred years.",
]

#: three clearly unrelated paragraphs (a council meeting, a flood, a phone launch): the confidence tests'
UNRELATED_TEXT = (
    "The committee met on Monday. It approved the budget after a long debate. The chair thanked the members. "
    "Next year's spending will rise by two percent. Several members asked about the new schools. "
    "The treasurer answered every question.\n\n"
    "Rain fell all night and the river rose quickly. Farmers moved their cattle to higher ground. "
    "The bridge was closed by the morning. Boats were tied up in the harbour. Water covered the lower fields. "
    "The storm moved east by noon.\n\n"
    "The new phone has a larger screen and a faster chip. Its battery lasts two days. Reviewers praised the "
    "camera. The price is lower than last year's model. Shops expect long queues. "
    "The company sold a million units in a week.\n"
)

#: about 700 tokens of words and no punctuation: one sentence, as a transcript's, far from repetitive
WORDS = " ".join(f"the {w} of {v} went home and" for w in ("river", "council", "engine", "garden", "letter",
                                                            "market", "doctor", "winter", "school", "bridge")
                 for v in ("salt", "iron", "bread", "music", "glass", "paper", "stone", "cloth", "wheat", "light"))
