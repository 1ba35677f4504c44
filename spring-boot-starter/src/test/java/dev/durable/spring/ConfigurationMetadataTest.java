package dev.durable.spring;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The configuration metadata of the properties derived from the option lists ({@link OptionProperties})
 * is generated here, into {@code META-INF/additional-spring-configuration-metadata.json}, which the
 * configuration processor merges into the starter's {@code spring-configuration-metadata.json}. The
 * derived entries are those whose {@code sourceType} is an options class; the others (the health
 * indicator's, tracing's) are written by hand and kept. A file behind the options fails this test:
 * regenerate it with {@code mvn -B -pl spring-boot-starter -am verify -Dtest=ConfigurationMetadataTest
 * -Dsurefire.failIfNoSpecifiedTests=false -Ddurable.metadata.write=true}.
 */
class ConfigurationMetadataTest {

    private static final Path FILE = Path.of("src/main/resources/META-INF/additional-spring-configuration-metadata.json");
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void theCommittedMetadataDescribesEveryDerivedProperty() throws IOException {
        String committed = Files.readString(FILE);
        String generated = generated(committed);
        if (Boolean.getBoolean("durable.metadata.write")) {
            Files.writeString(FILE, generated);
            committed = generated;
        }
        assertThat(committed).as(FILE + " is behind the option lists: regenerate it with -Ddurable.metadata.write=true"
                + " (see this test's comment)").isEqualTo(generated);
    }

    /** The committed file with its derived entries replaced by those the option lists give now. */
    static String generated(String committed) throws IOException {
        JsonNode current = JSON.readTree(committed);
        List<OptionProperties.Property> derived = OptionProperties.properties();
        Set<String> derivedNames = new HashSet<>();
        derived.forEach(property -> derivedNames.add(property.name()));
        Set<String> sources = new HashSet<>();
        derived.forEach(property -> sources.add(property.source()));

        List<JsonNode> properties = new ArrayList<>();
        for (JsonNode property : current.path("properties")) {
            if (!sources.contains(property.path("sourceType").asText())) {
                properties.add(property);
            }
        }
        List<JsonNode> hints = new ArrayList<>();
        for (JsonNode hint : current.path("hints")) {
            if (!derivedNames.contains(hint.path("name").asText())) {
                hints.add(hint);
            }
        }
        for (OptionProperties.Property property : derived) {
            ObjectNode entry = JSON.createObjectNode().put("name", property.name()).put("type", property.type())
                    .put("description", property.description()).put("sourceType", property.source());
            if (property.defaultValue() != null) {
                entry.set("defaultValue", JSON.valueToTree(property.defaultValue()));
            }
            properties.add(entry);
            if (!property.choices().isEmpty()) {
                ObjectNode hint = JSON.createObjectNode().put("name", property.name());
                ArrayNode values = hint.putArray("values");
                property.choices().forEach(choice -> values.addObject().put("value", choice));
                hints.add(hint);
            }
        }
        properties.sort(Comparator.comparing(property -> property.path("name").asText()));
        hints.sort(Comparator.comparing(hint -> hint.path("name").asText()));
        ObjectNode file = JSON.createObjectNode();
        file.putArray("properties").addAll(properties);
        file.putArray("hints").addAll(hints);
        DefaultPrettyPrinter printer = new DefaultPrettyPrinter().withObjectIndenter(new DefaultIndenter("  ", "\n"))
                .withArrayIndenter(new DefaultIndenter("  ", "\n"));
        return JSON.writer(printer).writeValueAsString(file) + "\n";
    }
}
