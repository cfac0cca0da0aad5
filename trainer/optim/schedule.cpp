// placeholder: implemented in this change
