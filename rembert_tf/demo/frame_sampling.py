"""Random clause meanings (`grammar.Frame`) for the demo corpus and the NLI pairs.

`sample_frame` draws a frame that respects selectional restrictions (people
read letters, animals chase animals ...); all randomness comes from the
`random.Random` passed in.

Example:
```python
import random
from rembert_tf.demo import frame_sampling
rng = random.Random(0)
frame = frame_sampling.sample_frame(rng, subject="farmer", negation_prob=0.0)
frame_sampling.adjective_for(rng, "dog", p=1.0)   # an adjective that fits dogs
```
"""
import random
from typing import Mapping, Optional, Tuple

from rembert_tf.demo import grammar
from rembert_tf.demo import lexicon as lx


def pick_subject(rng: random.Random) -> str:
  """A person or an animal: a name 30% of the time, else a noun."""
  if rng.random() < 0.3:
    return rng.choice(lx.NAMES)
  return rng.choice(lx.nouns_of(lx.ANIMATE))


def adjective_for(rng: random.Random, key: str, p: float) -> Optional[str]:
  """With probability `p`, an adjective that fits noun `key` (never for names)."""
  if key in lx.NAME_GENDER or rng.random() >= p:
    return None
  cls = lx.NOUNS[key].noun_class
  return rng.choice([a for a, classes in lx.ADJECTIVES.items()
                     if cls in classes])


def sample_frame(rng: random.Random,
                 subject: Optional[str] = None,
                 subject_adjective: Optional[str] = None,
                 tense: Optional[str] = None,
                 location: Optional[str] = None,
                 negation_prob: float = 0.15,
                 topic: Optional[Mapping[str, Tuple[str, Optional[str]]]] = None
                 ) -> grammar.Frame:
  """A random frame respecting the selectional restrictions; the arguments
  given are fixed instead of sampled. `topic`: {verb: (object,
  object_adjective)} of a story, used when the subject can do one of them."""
  if subject is None:
    subject = pick_subject(rng)
    subject_adjective = adjective_for(rng, subject, 0.35)
  verbs = lx.verbs_for(subject)
  topical = [v for v in (topic or {}) if v in verbs]
  verb = rng.choice(topical) if topical else rng.choice(verbs)
  object_classes, places = lx.VERBS[verb].objects, lx.VERBS[verb].places
  obj = obj_adj = None
  count, obj_definite = 1, rng.random() < 0.5
  if object_classes is not None and topical and topic[verb][0] != subject:
    obj, obj_adj = topic[verb]
    obj_definite = rng.random() < 0.8
  elif object_classes is not None:
    obj = rng.choice(lx.nouns_of(object_classes, other_than=subject))
    obj_adj = adjective_for(rng, obj, 0.35)
  if obj is not None and lx.NOUNS[obj].countable and rng.random() < 0.25:
    count = rng.randint(2, 9)
  tense = tense or rng.choice(lx.TENSES)
  time = rng.choice(lx.times_of(tense)) if rng.random() < 0.45 else None
  if location is None and rng.random() < 0.55:
    location = (rng.choice(places) if places and rng.random() < 0.75
                else rng.choice(tuple(lx.PLACES)))
  manner = rng.choice(lx.MANNERS) if rng.random() < 0.25 else None
  return grammar.Frame(
      subject=subject, verb=verb, object=obj,
      subject_adjective=subject_adjective, object_adjective=obj_adj,
      object_count=count, subject_definite=rng.random() < 0.7,
      object_definite=obj_definite, tense=tense, time=time,
      location=location, manner=manner,
      negated=rng.random() < negation_prob)
