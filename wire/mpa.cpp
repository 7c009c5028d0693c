// placeholder: filled by the wire/mpa work
