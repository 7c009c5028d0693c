// placeholder: filled by the wire/fpdu work
