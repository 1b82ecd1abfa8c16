"""A Modal image for plays (SCHEDULER_MODAL_IMAGE_DEFINITION=myproject.sandbox_image:plays_image, say).

Copy this into your own project. The scheduler calls it when it starts a sandbox and adds its runner to what it
returns; Modal builds the image on first use and caches it.
"""

import modal


def plays_image() -> modal.Image:
    return (
        modal.Image.debian_slim(python_version="3.12")
        .pip_install("requests==2.32.3")
        # Your plays' package, from the scheduler's own environment, mounted when a sandbox starts.
        .add_local_python_source("myplays")
    )
