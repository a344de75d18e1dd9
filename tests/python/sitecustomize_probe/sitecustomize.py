"""A user's own sitecustomize: ovf's bootstrap must hand over to it."""

print("user sitecustomize ran", flush=True)
