"""`collectstatic`, always into compressed, content-hashed files (WhiteNoise's manifest storage).

Settings choose that storage only once a manifest exists (before, pages link
the apps' own files); the command that makes the manifest must not depend on it.
"""

from django.contrib.staticfiles.management.commands.collectstatic import Command as DjangoCollectStatic
from whitenoise.storage import CompressedManifestStaticFilesStorage


class Command(DjangoCollectStatic):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.storage = CompressedManifestStaticFilesStorage()
