// placeholder: filled by the wire/cm work
