"""Simple children's stories from a small hand-written grammar.

Every story is: an opening that introduces a hero, one of several plots
(a lost toy, sharing, a new friend, helping, a rainy day, ...) told with a
friend and sometimes a parent, and an ending.  Each sentence has a few
alternative wordings, and names, animals, places, toys and colours are
drawn at random, so the model sees the same structures with many different
words.  Seeded: the same seed gives the same stories.  All text here was
written for this project.

Run alone to print a few stories:  /usr/bin/python3 tools/train/corpus.py [n]
"""
import random
import sys

GIRLS = ["Lily", "Mia", "Anna", "Sara", "Emma", "Lucy", "Zoe", "Ella", "Rose",
         "Amy", "Kate", "Nina", "Ruby", "Maya", "Sophie", "Grace", "Molly",
         "Daisy", "Ivy", "Hannah"]
BOYS = ["Tom", "Ben", "Sam", "Max", "Leo", "Jack", "Tim", "Finn", "Noah",
        "Alex", "Dan", "Oliver", "Jake", "Luke", "Theo", "Bob", "Peter",
        "Henry", "Oscar", "Billy"]
ANIMALS = ["cat", "dog", "bunny", "bear", "bird", "fox", "duck", "mouse",
           "frog", "owl", "pig", "puppy", "kitten", "squirrel", "turtle", "lamb"]
TRAITS = ["little", "small", "kind", "happy", "brave", "shy", "curious",
          "funny", "friendly", "clever", "gentle", "cheerful"]
PLACES = [("the park", "in the park"), ("the garden", "in the garden"),
          ("the forest", "in the forest"), ("the beach", "at the beach"),
          ("the farm", "on the farm"), ("the lake", "by the lake"),
          ("the hill", "on the hill"), ("the meadow", "in the meadow"),
          ("the playground", "at the playground"), ("the woods", "in the woods"),
          ("the river", "by the river"), ("the yard", "in the yard")]
TOYS = ["ball", "kite", "doll", "toy car", "teddy bear", "boat", "drum",
        "hat", "book", "train", "robot", "yo-yo", "balloon", "bucket"]
COLORS = ["red", "blue", "green", "yellow", "pink", "purple", "orange",
          "shiny", "little", "big", "new", "soft"]
PARENTS = ["mom", "dad", "grandma", "grandpa"]
HOBBIES = ["play with {his} ball", "sing songs", "draw pictures", "run and jump",
           "read books", "look at the stars", "pick flowers", "dance",
           "build things with blocks", "splash in puddles", "climb trees",
           "play games with {his} friends", "help {his} {parent}",
           "watch the birds", "ride {his} bike"]
SPOTS = ["under the slide", "behind a big tree", "near the pond",
         "in the tall grass", "under a bush", "next to a big rock",
         "under the bench", "behind the fence", "in a pile of leaves"]


class Person:
    """A named character with the pronouns English needs for them."""

    def __init__(self, name, kind, female, trait):
        self.name, self.kind, self.trait = name, kind, trait
        self.he, self.him, self.his = ("she", "her", "her") if female else ("he", "him", "his")


def new_person(rng, exclude=()):
    female = rng.random() < 0.5
    name = rng.choice([n for n in (GIRLS if female else BOYS) if n not in exclude])
    if rng.random() < 0.5:
        kind = "girl" if female else "boy"
    else:
        kind = rng.choice(ANIMALS)
    return Person(name, kind, female, rng.choice(TRAITS))


def with_article(noun):
    return ("an " if noun[0] in "aeiou" else "a ") + noun


class Story:
    """Holds one story's choices and turns templates into sentences.

    In a template, {H} is the hero's name, {he}/{him}/{his} the hero's
    pronouns, {F}/{fhe}/{fhim}/{fhis} the friend's, {parent}, {place},
    {at_place}, {toy}; {a_toy}, {a_kind}, {a_fkind} add "a" or "an".
    A capitalised key ({He}, {Fhe}, {Parent}) gives the capitalised word."""

    def __init__(self, rng):
        self.rng = rng
        self.hero = new_person(rng)
        self.friend = new_person(rng, exclude=[self.hero.name])
        self.parent = rng.choice(PARENTS)
        self.place, self.at_place = rng.choice(PLACES)
        self.toy = rng.choice(COLORS) + " " + rng.choice(TOYS)
        h, f = self.hero, self.friend
        self.words = {"H": h.name, "he": h.he, "him": h.him, "his": h.his,
                      "kind": h.kind, "trait": h.trait,
                      "F": f.name, "fhe": f.he, "fhim": f.him, "fhis": f.his,
                      "fkind": f.kind, "ftrait": f.trait,
                      "parent": self.parent, "place": self.place,
                      "at_place": self.at_place, "toy": self.toy,
                      "a_toy": with_article(self.toy), "a_kind": with_article(h.kind),
                      "a_fkind": with_article(f.kind)}
        for k in ("he", "his", "fhe", "fhis", "parent", "at_place"):
            self.words[k[0].upper() + k[1:]] = self.words[k].capitalize()
        self.paragraphs = [[]]

    def pick(self, *options):
        return self.rng.choice(options)

    def say(self, *options):
        """Adds one sentence (a template picked from options)."""
        text = self.pick(*options)
        self.paragraphs[-1].append(text.format(**self.words))

    def new_paragraph(self):
        if self.paragraphs[-1]:
            self.paragraphs.append([])

    def text(self):
        return "\n\n".join(" ".join(p) for p in self.paragraphs if p)


# ------------------------------------------------------------ openings

def opening(s):
    hobby = s.pick(*HOBBIES)
    s.say("Once upon a time, there was a {trait} {kind} named {H}.",
          "Once upon a time, in a small town, there lived a {trait} {kind} named {H}.",
          "There was once a {trait} {kind} called {H}.",
          "Once upon a time, there was {a_kind} named {H}. {He} was very {trait}.",
          "{H} was a {trait} {kind}.")
    s.say("{He} loved to " + hobby + ".",
          "{H} liked to " + hobby + " every day.",
          "Every day, {he} liked to " + hobby + ".")


def day_start(s):
    s.say("One day, {H} went to {place}.",
          "One sunny morning, {H} went to {place} with {his} {parent}.",
          "One day, {H} and {his} {parent} went to {place}.",
          "One afternoon, {H} went out to play {at_place}.")


# ------------------------------------------------------------ plots

def plot_lost_toy(s):
    s.say("{H} had {a_toy} that {he} loved very much.",
          "{His} favorite toy was {a_toy}.",
          "{H} had {a_toy}. It was {his} favorite toy.")
    day_start(s)
    s.say("{He} played with {his} {toy} all day.",
          "{He} took {his} {toy} and played with it for a long time.")
    s.new_paragraph()
    s.say("But when it was time to go home, {H} could not find {his} {toy}.",
          "Then {H} looked down. {His} {toy} was gone!")
    s.say("{H} was very sad.", "{H} started to cry.", "{H} felt sad and worried.")
    s.say('"Where is my {toy}?" {H} cried.', '"Oh no, where is my {toy}?" said {H}.')
    s.say("Just then, {F} the {fkind} came by.", "Then {H} saw {F}, a {ftrait} {fkind}.")
    s.say('"Why are you sad?" asked {F}.', '"What is wrong?" asked {F}.')
    s.say('"I lost my {toy}," said {H}.', '"I can not find my {toy}," said {H}.')
    s.say('"Don\'t worry. I will help you find it," said {F}.',
          '"Let\'s look for it together," said {F}.')
    s.new_paragraph()
    spots = s.rng.sample(SPOTS, 3)
    s.say("They looked " + spots[0] + ", but it was not there.")
    s.say("Then they looked " + spots[1] + ". It was not there either.",
          "They looked " + spots[1] + " too, but they could not find it.")
    s.say("At last, {F} saw something " + spots[2] + ". It was the {toy}!",
          "Then {H} looked " + spots[2] + ". There was the {toy}!")
    s.say('"Thank you, {F}!" said {H}. "You are a good friend."',
          '{H} was so happy. "Thank you for helping me, {F}!" {he} said.')
    s.new_paragraph()
    s.say("{H} hugged {his} {toy} and smiled.", "{H} held {his} {toy} tight.")
    s.say("From that day on, {H} and {F} were best friends.",
          "{H} learned to take good care of {his} things.",
          "After that, {H} never left {his} {toy} alone again.")


def plot_sharing(s):
    s.say("{H} had {a_toy}. {He} loved it very much.",
          "{H} got {a_toy} for {his} birthday.")
    s.say("One day, {he} took it to {place} to play.",
          "{He} took the {toy} to {place}.")
    s.say("There, {he} met {F} the {fkind}.", "{At_place}, {he} saw {F}, a {ftrait} {fkind}.")
    s.say('"Can I play with your {toy}?" asked {F}.',
          '"What a nice {toy}! Can I play with it too?" asked {F}.')
    s.say('"No, it is mine!" said {H}.', '"No! I want to play with it alone," said {H}.')
    s.new_paragraph()
    s.say("{F} was sad and walked away.", "{F} felt sad and sat down alone.")
    s.say("{H} played alone, but it was not fun. {He} felt lonely.",
          "{H} played with the {toy}, but soon {he} was bored.")
    s.say("Then {H} had an idea. {He} ran to {F}.", "{H} thought about {F}. {He} felt bad.")
    s.say('"I am sorry, {F}," said {H}. "Do you want to play with me?"',
          '"I am sorry. Let\'s play together," said {H}.')
    s.say('"Yes, please!" said {F}.', '{F} smiled. "Thank you, {H}!"')
    s.new_paragraph()
    s.say("They played with the {toy} together and laughed a lot.",
          "They took turns with the {toy} and had lots of fun.")
    s.say("{H} learned that sharing makes everyone happy.",
          "Playing together was much more fun than playing alone.",
          "From that day on, {H} always shared {his} toys.")


GAMES = {
    "hide and seek": ["{H} hid behind a tree, and {F} counted to ten.",
                      '"Found you!" said {F}, and they both laughed.'],
    "tag": ["They ran and ran all over {place}.",
            '"You are it!" shouted {H}, and {F} ran after {him}.'],
    "catch": ["{H} threw a ball, and {F} caught it.",
              "They threw the ball back and forth many times."],
    "a game of jump": ["They jumped over the rocks and the little puddles.",
                       "{F} jumped very high, and {H} clapped."],
}


def plot_new_friend(s):
    day_start(s)
    s.say("{He} wanted to play, but {he} did not know anyone there.",
          "{He} wanted a friend to play with.")
    s.say("Then {he} saw a {ftrait} {fkind} sitting " + s.pick(*SPOTS) + ". It was {F}.",
          "Then {he} saw {a_fkind} named {F}. {Fhe} was all alone.")
    s.new_paragraph()
    s.say('"Hello! My name is {H}. What is your name?" asked {H}.',
          '{H} walked up and said, "Hi! I am {H}."')
    s.say('"My name is {F}," said the {fkind} in a small voice.',
          '"Hi, I am {F}," said the {fkind}.')
    game = s.pick(*GAMES)
    s.say('"Do you want to play ' + game + ' with me?" asked {H}.',
          '"Let\'s play ' + game + '!" said {H}.')
    s.say("{F} smiled and nodded.", '"Yes!" said {F}.')
    for line in GAMES[game]:
        s.say(line)
    s.new_paragraph()
    s.say("When the sun went down, it was time to go home.",
          "Soon it was time to go home.")
    s.say('"Can we play again tomorrow?" asked {F}.',
          '"Will you come back tomorrow?" asked {F}.')
    s.say('"Yes!" said {H}. "You are my friend now."',
          '"Of course!" said {H} with a big smile.')
    s.say("And from that day on, {H} and {F} played together every day.",
          "{H} was happy. {He} had a new friend.")


STUCK = {
    "in the mud": "{H} held {fhis} paw and pulled and pulled. At last, {F} came out of the mud.",
    "up in a tall tree": "{H} found a long branch and held it up. {F} climbed down slowly.",
    "in a hole": "{H} found a long rope and let it down. {F} held the rope, and {H} pulled {fhim} out.",
    "in a thorny bush": "{H} moved the branches away very carefully. {F} was free.",
}


def plot_helping(s):
    opening_walk = s.pick("One day, {H} was walking {at_place}.",
                          "One morning, {H} went for a walk to {place}.")
    s.say(opening_walk)
    s.say('{He} heard a small voice. "Help! Help!"', "Suddenly, {he} heard someone cry for help.")
    where = s.pick(*STUCK)
    s.say("It was {F} the {fkind}. {Fhe} was stuck " + where + ".",
          "{He} looked around and saw {F}. The poor {fkind} was stuck " + where + ".")
    s.say('"Don\'t be scared. I will help you," said {H}.',
          '"Hold on, {F}! I am coming," said {H}.')
    s.new_paragraph()
    s.say("{H} thought and thought. Then {he} had an idea.", "{H} did not give up.")
    s.say(STUCK[where])
    s.say('"Thank you, {H}! You are so kind," said {F}.',
          '{F} hugged {H}. "You saved me!" {fhe} said.')
    s.new_paragraph()
    s.say("{H} felt warm and happy inside.", "{H} smiled a big smile.")
    s.say("Helping others is a good thing to do.",
          "From that day on, {H} and {F} were good friends.",
          "{H} learned that being kind makes the world a better place.")


def plot_rainy_day(s):
    s.say("One day, {H} and {F} were playing {at_place}.",
          "One day, {H} went to {place} with {his} friend {F}.")
    s.say("The sun was shining and the sky was blue.", "It was a warm and sunny day.")
    s.say("Suddenly, big dark clouds came. Then it started to rain.",
          "But then the wind began to blow, and it started to rain.")
    s.say('"Oh no! We will get wet!" said {F}.', '"Quick, let\'s go home!" said {H}.')
    s.new_paragraph()
    s.say("They ran home as fast as they could.", "They ran all the way to {H}'s house.")
    s.say("{H}'s {parent} gave them warm towels and hot milk.",
          "{H}'s {parent} made them some hot soup and gave them dry clothes.")
    s.say("They sat by the window and watched the rain.",
          "They played with blocks and read a book while it rained.")
    s.new_paragraph()
    s.say("After a while, the rain stopped.", "Soon the rain stopped and the sun came out.")
    s.say('They saw a big rainbow in the sky. "Look, a rainbow!" said {H}.',
          '"Look! A rainbow!" shouted {F}. It had so many colors.')
    s.say("They ran outside and jumped in the puddles.",
          "They went back outside to play.")
    s.say("It was the best day ever.", "{H} and {F} were very happy.")


FINDS = {
    "a small box": ("{He} opened the box slowly. Inside, there was a shiny gold coin.",
                    "a gold coin"),
    "a big egg": ("Then the egg began to crack! A tiny bird came out and said, \"Peep!\"",
                  "a baby bird"),
    "an old key": ("{He} tried the key on an old door in the garden. The door opened, "
                   "and behind it there were many pretty flowers.", "a secret garden"),
    "a little shell": ("{He} held the shell to {his} ear. {He} could hear the sea!",
                       "a magic shell"),
}


def plot_discovery(s):
    day_start(s)
    thing = s.pick(*FINDS)
    s.say("There, {he} found " + thing + " " + s.pick(*SPOTS) + ".",
          "{He} saw " + thing + " " + s.pick(*SPOTS) + ".")
    s.say('"What is this?" {he} wondered.', '"Wow! What can it be?" said {H}.')
    s.new_paragraph()
    s.say(FINDS[thing][0])
    s.say("{H} could not believe {his} eyes.", "{H} was very surprised.")
    s.say("{He} ran to show {his} {parent}.", "{He} ran home to show {his} {parent}.")
    s.say('"Look what I found!" said {H}.', '"{Parent}, look! I found ' + FINDS[thing][1] + '!" said {H}.')
    s.say('"Wow, that is wonderful," said {his} {parent}.',
          '{His} {parent} smiled. "What a lucky day!"')
    s.new_paragraph()
    s.say("{H} told {F} about it too, and they talked about it all day.",
          "That night, {H} dreamed about " + FINDS[thing][1] + ".")
    s.say("It was a very special day.", "{H} would never forget that day.")


def plot_cake(s):
    s.say("Tomorrow was {F}'s birthday.", "It was almost {F}'s birthday.")
    s.say("{H} wanted to make a cake for {fhim}.",
          "{H} wanted to give {F} something special.")
    s.say("{He} asked {his} {parent} for help.", '"{Parent}, can you help me make a cake?" asked {H}.')
    s.say('"Of course," said {his} {parent}.', "{His} {parent} said yes.")
    s.new_paragraph()
    s.say("They got flour, eggs, milk and sugar.", "They put flour, eggs and sugar on the table.")
    s.say("{H} mixed everything in a big bowl.", "{H} stirred and stirred.")
    s.say("Then they put the cake in the oven.", "Then {his} {parent} put the cake in the hot oven.")
    s.say("Soon, the whole house smelled sweet.", "Soon, the cake was ready. It looked very yummy.")
    s.new_paragraph()
    s.say('The next day, {H} gave the cake to {F}. "Happy birthday!" said {H}.',
          '{H} brought the cake to {F}. "Happy birthday, {F}!" {he} said.')
    s.say('"Thank you! This is the best cake ever," said {F}.',
          '{F} was so happy. "Thank you, {H}!" {fhe} said.')
    s.say("They ate the cake together and sang songs.",
          "They shared the cake with all their friends.")
    s.say("It was a wonderful birthday.", "{H} was happy that {F} was happy.")


FEARS = {
    "the dark": ["At night, {H} could not sleep.",
                 '"{Parent}, I am scared of the dark," said {H}.',
                 "{His} {parent} came and sat on the bed.",
                 '"There is nothing to be afraid of," said {his} {parent}. '
                 '"Look, the moon and the stars are watching over you."',
                 "{H} looked out of the window. The moon was bright and round.",
                 "{H} closed {his} eyes and fell asleep."],
    "the big dog next door": ["One day, the big dog ran up to {H}.",
                              "{H} was scared and stood very still.",
                              "But the dog just wagged its tail and licked {his} hand.",
                              "The dog was friendly! {H} laughed and patted its head.",
                              '"Good dog," said {H}.'],
    "the water": ["One hot day, {his} {parent} took {him} to the lake.",
                  '"I don\'t want to go in the water," said {H}.',
                  '"I will hold your hand," said {his} {parent}.',
                  "{H} put one foot in the water. It was cool and nice.",
                  "Soon {H} was splashing and laughing."],
    "loud thunder": ["One night, there was a big storm. Boom! went the thunder.",
                     "{H} hid under the blanket.",
                     "{His} {parent} came in and gave {him} a big hug.",
                     '"Thunder is just a loud noise. It can not hurt you," said {his} {parent}.',
                     "They counted the seconds between the flashes, and soon the storm went away."],
}


def plot_fear(s):
    fear = s.pick(*FEARS)
    s.say("{H} was afraid of " + fear + ".", "But {H} had one problem. {He} was afraid of " + fear + ".")
    s.new_paragraph()
    for line in FEARS[fear]:
        s.say(line)
    s.new_paragraph()
    s.say("After that, {H} was not afraid anymore.",
          "{H} learned to be brave.", "Now {H} knew that " + fear + " was not so scary.")
    s.say("{He} felt very proud of {him}self.",
          "{He} smiled a big smile.")


def plot_race(s):
    s.say("One day, {H} and {F} were {at_place}.", "{H} and {F} went to {place} to play.")
    s.say('"Let\'s have a race to the big tree!" said {F}.',
          '"I can run faster than you!" said {H}. "Let\'s race!"')
    s.say('"Ready, set, go!" they shouted.', "They counted to three and started to run.")
    s.new_paragraph()
    s.say("{H} ran very fast. {F} ran fast too.", "They ran and ran as fast as they could.")
    s.say("But then {F} tripped on a rock and fell down.", "Suddenly, {F} fell and hurt {fhis} knee.")
    s.say("{H} saw this and stopped running.", "{H} heard {F} cry and turned around.")
    s.say('"Are you okay?" asked {H}.', '"Let me help you," said {H}.')
    s.say("{He} helped {F} get up.", "{He} gave {F} {his} hand.")
    s.new_paragraph()
    s.say("They walked to the big tree together.", "They finished the race together, side by side.")
    s.say('"Thank you, {H}. You are a true friend," said {F}.',
          '{F} smiled. "You are the best friend ever."')
    s.say("Being a good friend is better than winning.",
          "{H} did not win the race, but {he} felt happy.")


def plot_beach(s):
    s.say("One sunny day, {H} went to the beach with {his} {parent}.",
          "One summer day, {H} and {F} went to the beach.")
    s.say("{H} wanted to build a big sandcastle.", "{H} brought {his} red bucket and a little spade.")
    s.say("{He} dug in the sand and made tall towers.",
          "{He} filled the bucket with sand and made a castle with four towers.")
    s.new_paragraph()
    s.say("But then a big wave came and washed the castle away!",
          "Then a big wave came. Splash! The sandcastle was gone.")
    s.say("{H} was sad.", '"Oh no! My castle!" cried {H}.')
    s.say('{F} came over. "Let\'s build a new one together," said {F}.',
          '"Don\'t be sad. We can build a new one," said {F}.')
    s.new_paragraph()
    s.say("This time they built it far from the water.",
          "They built a new castle, even bigger than before.")
    s.say("They put shells and little stones on the towers.",
          "They made a wall around it to keep the waves out.")
    s.say("It was the most beautiful sandcastle on the beach.",
          "{H} and {F} were very proud.")


PLOTS = {"a lost toy": plot_lost_toy, "sharing": plot_sharing,
         "making a new friend": plot_new_friend, "helping a friend": plot_helping,
         "a rainy day": plot_rainy_day, "a surprise": plot_discovery,
         "a birthday cake": plot_cake, "being brave": plot_fear,
         "a race": plot_race, "a day at the beach": plot_beach}


def make_story(rng):
    """Returns (topic, Story) for one random story."""
    s = Story(rng)
    topic = rng.choice(sorted(PLOTS))
    opening(s)
    if rng.random() < 0.5:
        s.new_paragraph()
    PLOTS[topic](s)
    return topic, s


def make_request(rng, topic, s):
    """A user's request for this story, used for the chat-formatted samples."""
    kind = s.hero.kind
    article = "an" if kind[0] in "aeiou" else "a"
    return rng.choice([
        "Tell me a story.",
        "Tell me a story about %s %s." % (article, kind),
        "Can you tell me a story about %s %s named %s?" % (article, kind, s.hero.name),
        "Please tell me a short story about %s." % topic,
        "Write a story about %s and %s." % (s.hero.name, s.friend.name),
        "I want a story about %s." % topic,
    ])


def stories(seed, n):
    """n (topic, request, text) triples, the same for the same seed."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        topic, s = make_story(rng)
        out.append((topic, make_request(rng, topic, s), s.text()))
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for topic, req, text in stories(1, n):
        print("[%s] %s\n%s\n" % (topic, req, text))
