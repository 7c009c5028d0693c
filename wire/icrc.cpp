// placeholder: filled by the wire/icrc work
