"""Task models that consume ELMo: a CRF sequence tagger (NER) and max-pooling or BCN sentence classifiers (SST).

The task kinds and what each decides (data format, metric, model) are :data:`~elmo.tasks.kinds.TASK_KINDS`.

    from elmo.tasks import build_runner, load_task_data, train_task
    from elmo.tasks.task_config import read_task_config
    config = read_task_config("ner")  # a shipped config by name, or a JSON file
    data = load_task_data("ner", "train.txt", "dev.txt", "test.txt")
    runner = build_runner(config, data, word_vectors="vectors.txt", bilm_dir="bilm/")
    result = train_task(runner, data, output_dir="runs/ner", bilm_dir="bilm/")
"""

from elmo.tasks.conll import TaggedSentence, read_conll
from elmo.tasks.crf import ConditionalRandomField, bio_allowed_transitions
from elmo.tasks.data import load_task_data, read_examples
from elmo.tasks.elmo_features import ActivationCache, CachedElmo
from elmo.tasks.kinds import TASK_KINDS, TaskKind, task_kind
from elmo.tasks.model_config import ModelConfig
from elmo.tasks.runner import TaskRunner
from elmo.tasks.sentence_labels import LabelledSentence, read_labelled_sentences
from elmo.tasks.task_checkpoint import load_task_model, save_task_model
from elmo.tasks.task_config import ElmoUseConfig, TaskConfig, TaskTrainConfig
from elmo.tasks.task_trainer import TaskData, TrainResult, build_runner, train_task
from elmo.tasks.word_vectors import read_word_vectors, train_word_vectors

__all__ = [
    "TASK_KINDS",
    "ActivationCache",
    "CachedElmo",
    "ConditionalRandomField",
    "ElmoUseConfig",
    "LabelledSentence",
    "ModelConfig",
    "TaggedSentence",
    "TaskConfig",
    "TaskData",
    "TaskKind",
    "TaskRunner",
    "TaskTrainConfig",
    "TrainResult",
    "bio_allowed_transitions",
    "build_runner",
    "load_task_data",
    "load_task_model",
    "read_conll",
    "read_examples",
    "read_labelled_sentences",
    "read_word_vectors",
    "save_task_model",
    "task_kind",
    "train_task",
    "train_word_vectors",
]
